// layer_norm, batch_norm and normalize: values against naive per-row / per-channel loops, the
// statistics of the output, batch norm's running-statistics update (momentum, unbiased variance)
// over two steps and its eval mode, float32 numerics on shifted data, float64 gradient checks for
// every differentiable argument (incl. non-contiguous inputs and the zero vector for normalize),
// and error messages.
#include <cmath>

#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

Tensor random(const Shape& shape, double scale, double shift, uint64_t seed, DType dtype = DType::Float64) {
  Generator gen(seed);
  return (randn(shape, DType::Float64, &gen) * scale + shift).to(dtype);
}

// Naive layer norm over the last dim; w/b may be empty (no affine).
std::vector<double> layer_norm_ref(const Tensor& x, const std::vector<double>& w, const std::vector<double>& b,
                                   double eps) {
  std::vector<double> v = x.to_vector<double>(), out(v.size());
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += v[r * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (v[r * C + c] - mu) * (v[r * C + c] - mu) / C;
    for (int64_t c = 0; c < C; ++c) {
      double y = (v[r * C + c] - mu) / std::sqrt(var + eps);
      out[r * C + c] = y * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
    }
  }
  return out;
}

struct ChannelStats {
  std::vector<double> mean, var;  // biased variance
};
// Per-channel statistics of [N, C, ...] by a naive loop.
ChannelStats channel_stats(const Tensor& x) {
  std::vector<double> v = x.to_vector<double>();
  const int64_t N = x.shape()[0], C = x.shape()[1], S = x.numel() / (N * C);
  ChannelStats st{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) st.mean[c] += v[(n * C + c) * S + s] / (N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        double d = v[(n * C + c) * S + s] - st.mean[c];
        st.var[c] += d * d / (N * S);
      }
  }
  return st;
}

// Naive per-channel (x − mean)/√(var + eps)·w + b.
std::vector<double> batch_norm_ref(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                                   const std::vector<double>& w, const std::vector<double>& b, double eps) {
  std::vector<double> v = x.to_vector<double>(), out(v.size());
  const int64_t N = x.shape()[0], C = x.shape()[1], S = x.numel() / (N * C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        int64_t i = (n * C + c) * S + s;
        out[i] = (v[i] - mean[c]) / std::sqrt(var[c] + eps) * w[c] + b[c];
      }
  return out;
}

}  // namespace

// ---- layer norm ------------------------------------------------------------------------------------

TEST_CASE("layer_norm normalises each row and matches a naive reference", "[normalization][layer_norm]") {
  Tensor x = random({4, 7, 32}, 3.0, 2.0, 1);
  Tensor y = layer_norm(x, Tensor(), Tensor());
  std::vector<double> mu = mean(y, {2}).to_vector<double>(), var = ::tessera::var(y, {2}, 0).to_vector<double>();
  for (double m : mu) CHECK(std::abs(m) < 1e-14);
  for (double v : var) CHECK(v == Approx(1.0).epsilon(1e-5));  // 1 − eps/σ² with σ² ≈ 9
  CHECK(max_abs_diff(y.to_vector<double>(), layer_norm_ref(x, {}, {}, 1e-5)) < 1e-13);

  Tensor w = random({32}, 1.0, 1.0, 2), b = random({32}, 1.0, 0.0, 3);
  std::vector<double> wv = w.to_vector<double>(), bv = b.to_vector<double>();
  CHECK(max_abs_diff(layer_norm(x, w, b, 1e-3).to_vector<double>(), layer_norm_ref(x, wv, bv, 1e-3)) < 1e-13);
  CHECK(max_abs_diff(layer_norm(x, w, Tensor()).to_vector<double>(), layer_norm_ref(x, wv, {}, 1e-5)) < 1e-13);
  CHECK(max_abs_diff(layer_norm(x, Tensor(), b).to_vector<double>(), layer_norm_ref(x, {}, bv, 1e-5)) < 1e-13);
  // A non-contiguous input normalises its logical rows.
  Tensor xt = x.transpose(1, 2);
  CHECK(max_abs_diff(layer_norm(xt, Tensor(), Tensor()).to_vector<double>(),
                     layer_norm_ref(xt.contiguous(), {}, {}, 1e-5)) < 1e-13);
}

TEST_CASE("float32 layer_norm is accurate on shifted data", "[normalization][layer_norm]") {
  // Mean 1000, std 1: a one-pass E[x²] − E[x]² variance in float32 would lose every digit.
  Tensor x = random({1576, 384}, 1.0, 1000.0, 4);
  Tensor w = random({384}, 1.0, 1.0, 5), b = random({384}, 1.0, 0.0, 6);
  Tensor y32 = layer_norm(x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32));
  CHECK(max_abs_diff(y32.to(DType::Float64), layer_norm(x, w, b)) < 2e-3);

  // Backward in float32 against float64 (parallel path, gweight/gbias summed over 1576 rows).
  auto grads = [&](DType dt) {
    Tensor xl = x.to(dt).set_requires_grad(), wl = w.to(dt).set_requires_grad(), bl = b.to(dt).set_requires_grad();
    Generator gen(7);
    layer_norm(xl, wl, bl).backward(randn(x.shape(), dt, &gen));
    return std::vector<Tensor>{xl.grad().to(DType::Float64), wl.grad().to(DType::Float64),
                               bl.grad().to(DType::Float64)};
  };
  std::vector<Tensor> g32 = grads(DType::Float32), g64 = grads(DType::Float64);
  CHECK(max_abs_diff(g32[0], g64[0]) < 5e-3);
  CHECK(max_abs_diff(g32[1], g64[1]) < 5e-2);  // sums of ~1576 terms of size ~1
  CHECK(max_abs_diff(g32[2], g64[2]) < 1e-3);
}

// ---- batch norm ------------------------------------------------------------------------------------

TEST_CASE("batch_norm training normalises per channel and matches a naive reference", "[normalization][batch_norm]") {
  for (Shape shape : {Shape{4, 3, 5, 6}, Shape{16, 5}, Shape{2, 3, 7}}) {
    INFO("shape " << shape_str(shape));
    Tensor x = random(shape, 2.0, 1.5, 1);
    const int64_t C = shape[1];
    Tensor w = random({C}, 0.5, 1.0, 2), b = random({C}, 1.0, 0.0, 3);
    ChannelStats st = channel_stats(x);
    Tensor y = batch_norm(x, Tensor(), Tensor(), w, b, true);
    CHECK(max_abs_diff(y.to_vector<double>(),
                       batch_norm_ref(x, st.mean, st.var, w.to_vector<double>(), b.to_vector<double>(), 1e-5)) < 1e-12);
    ChannelStats yst = channel_stats(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true));
    for (int64_t c = 0; c < C; ++c) {
      CHECK(std::abs(yst.mean[c]) < 1e-13);
      CHECK(yst.var[c] == Approx(1.0).epsilon(1e-5));
    }
  }
}

TEST_CASE("batch_norm updates running statistics like PyTorch and uses them in eval", "[normalization][batch_norm]") {
  const int64_t C = 3;
  Tensor x1 = random({4, C, 3, 2}, 2.0, 1.0, 1), x2 = random({4, C, 3, 2}, 0.5, -2.0, 2);
  Tensor rm = zeros({C}, DType::Float64), rv = ones({C}, DType::Float64);
  Tensor w = random({C}, 0.5, 1.0, 3).set_requires_grad(), b = random({C}, 1.0, 0.0, 4).set_requires_grad();
  const double momentum = 0.2, M = 4 * 3 * 2;
  // Expected: running = (1 − m)·running + m·batch, the variance unbiased (·M/(M−1)).
  std::vector<double> em(C, 0.0), ev(C, 1.0);
  for (const Tensor& x : {x1, x2}) {
    // x requires grad and grad mode is on: the in-place buffer update must still go through.
    Tensor xl = x.detach().set_requires_grad();
    Tensor y = batch_norm(xl, rm, rv, w, b, true, momentum);
    y.sum().backward();
    ChannelStats st = channel_stats(x);
    for (int64_t c = 0; c < C; ++c) {
      em[c] = (1 - momentum) * em[c] + momentum * st.mean[c];
      ev[c] = (1 - momentum) * ev[c] + momentum * st.var[c] * M / (M - 1);
    }
  }
  CHECK(max_abs_diff(rm.to_vector<double>(), em) < 1e-14);
  CHECK(max_abs_diff(rv.to_vector<double>(), ev) < 1e-14);
  CHECK_FALSE(rm.requires_grad());

  // Eval: normalises with the running statistics and leaves them alone.
  Tensor x3 = random({2, C, 4}, 1.0, 0.5, 5);
  std::vector<double> rm_before = rm.to_vector<double>(), rv_before = rv.to_vector<double>();
  Tensor y = batch_norm(x3, rm, rv, w, b, false, momentum, 1e-3);
  CHECK(max_abs_diff(y.to_vector<double>(),
                     batch_norm_ref(x3, em, ev, w.to_vector<double>(), b.to_vector<double>(), 1e-3)) < 1e-13);
  CHECK(rm.to_vector<double>() == rm_before);
  CHECK(rv.to_vector<double>() == rv_before);
}

TEST_CASE("float32 batch_norm agrees with float64", "[normalization][batch_norm]") {
  Tensor x = random({8, 16, 14, 14}, 1.0, 100.0, 6);
  Tensor rm = zeros({16}), rv = ones({16});
  Tensor y32 = batch_norm(x.to(DType::Float32), rm, rv, Tensor(), Tensor(), true);
  CHECK(max_abs_diff(y32.to(DType::Float64), batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true)) < 1e-3);
  ChannelStats st = channel_stats(x);
  std::vector<double> rmv = rm.to_vector<double>();
  for (int64_t c = 0; c < 16; ++c) CHECK(rmv[c] == Approx(0.1 * st.mean[c]).epsilon(1e-6));
}

// ---- normalize ---------------------------------------------------------------------------------

TEST_CASE("normalize gives unit norms and maps a zero row to zero", "[normalization][normalize]") {
  Tensor x = random({4, 6}, 2.0, 0.0, 1);
  Tensor x0 = random({5, 6}, 2.0, 0.0, 1);
  x0.narrow(0, 2, 1).zero_();
  Tensor y = normalize(x0, 1);
  std::vector<double> n = norm(y, {1}).to_vector<double>();
  for (int64_t r : {0, 1, 3, 4}) CHECK(n[r] == Approx(1.0).epsilon(1e-14));
  CHECK(n[2] == 0.0);
  std::vector<double> xv = x0.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t r = 0; r < 5; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 6; ++c) s += xv[r * 6 + c] * xv[r * 6 + c];
    for (int64_t c = 0; c < 6; ++c) CHECK(yv[r * 6 + c] == Approx(xv[r * 6 + c] / std::max(std::sqrt(s), 1e-12)));
  }
  std::vector<double> cols = norm(normalize(x, 0), {0}).to_vector<double>();
  for (double c : cols) CHECK(c == Approx(1.0).epsilon(1e-14));
  CHECK(max_abs_diff(normalize(x, -1), normalize(x, 1)) == 0.0);
}

// The gradient checks of layer_norm, batch_norm and normalize (a zero row included) are samples of
// the op table (tests/op_samples/normalization.cpp). At a zero row with the default eps the gradient
// g/eps is huge but must stay finite.
TEST_CASE("normalize's gradient at a zero row is finite with the default eps", "[normalization][normalize][autograd]") {
  Tensor z = leaf({3, 4}, -2, 2, 3);
  {
    NoGradGuard no_grad;
    z.narrow(0, 1, 1).zero_();
  }
  normalize(z, 1).sum().backward();
  for (double g : z.grad().to_vector<double>()) CHECK(std::isfinite(g));
}

// ---- errors --------------------------------------------------------------------------------------

TEST_CASE("normalization errors", "[normalization][errors]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(layer_norm(x, zeros({4}), Tensor()),
                    Catch::Contains("layer_norm") && Catch::Contains("weight") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(layer_norm(x, Tensor(), zeros({3}, DType::Float64)),
                    Catch::Contains("layer_norm") && Catch::Contains("bias") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(layer_norm(arange(6).reshape({2, 3}), Tensor(), Tensor()),
                    Catch::Contains("layer_norm") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(layer_norm(zeros({2, 0}), Tensor(), Tensor()),
                    Catch::Contains("layer_norm") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(batch_norm(zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("batch_norm") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("batch_norm") && Catch::Contains("more than 1 value per channel"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false),
                    Catch::Contains("batch_norm") && Catch::Contains("running_mean"));
  CHECK_THROWS_WITH(batch_norm(x, zeros({2}), ones({2}), Tensor(), Tensor(), true),
                    Catch::Contains("running_mean") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  CHECK_THROWS_WITH(batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), true), Catch::Contains("both"));
  Tensor rm = zeros({3}).set_requires_grad();
  CHECK_THROWS_WITH(batch_norm(x, rm, ones({3}), Tensor(), Tensor(), false),
                    Catch::Contains("batch_norm") && Catch::Contains("must not require grad"));
  CHECK_THROWS_WITH(normalize(x, 2), Catch::Contains("normalize") && Catch::Contains("dim 2"));
  CHECK_THROWS_WITH(normalize(scalar_tensor(1.0), 0), Catch::Contains("normalize"));
}
