// The fused ops (ops/fused.h) against their unfused compositions: values and every gradient in
// float32 and float64, with and without the per-sample scale, erf and tanh GELU, non-contiguous
// inputs; float64 finite-difference checks; empty inputs; the error messages; and XCA's, CaiT's and
// CoaT's attention modules and XCiT's LPI with their fused ops and with the composed ops (their
// levers).
#include <algorithm>
#include <cmath>

#include "gradcheck.h"
#include "tessera/core/levers.h"
#include "tessera/nn/conv_attention.h"
#include "tessera/nn/lpi.h"
#include "tessera/nn/talking_heads.h"
#include "tessera/nn/xca.h"
#include "tests/kernel_calls.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

Tensor randn_of(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  return randn(shape, DType::Float64, &gen).to(dtype);
}

// The composition layer_scale_residual stands for.
Tensor layer_scale_reference(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& s) {
  Tensor scaled = gamma * f;
  if (s.defined()) {
    Shape per_sample(x.dim(), 1);
    per_sample[0] = x.size(0);
    scaled = s.view(per_sample) * scaled;
  }
  return x + scaled;
}

// Runs fn over fresh leaves copied from `values`, backward with `upstream`; returns output then grads.
std::vector<Tensor> run(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& values,
                        const Tensor& upstream) {
  std::vector<Tensor> leaves;
  for (const Tensor& v : values) leaves.push_back(v.detach().clone().set_requires_grad(true));
  Tensor y = fn(leaves);
  y.backward(upstream);
  std::vector<Tensor> out{y.detach()};
  for (const Tensor& l : leaves) out.push_back(l.grad());
  return out;
}

// Each result within tol of the reference, relative to the reference's largest magnitude (when above 1).
void check_same_results(const std::vector<Tensor>& fused, const std::vector<Tensor>& reference, double tol) {
  REQUIRE(fused.size() == reference.size());
  for (size_t k = 0; k < fused.size(); ++k) {
    INFO("result " << k << " (0 = output, then the inputs' gradients)");
    REQUIRE(fused[k].defined());
    const double magnitude = std::max(1.0, amax(abs(reference[k])).item());
    CHECK(max_abs_diff(fused[k], reference[k]) <= tol * magnitude);
  }
}

}  // namespace

TEST_CASE("layer_scale_residual equals x + s·gamma·f, values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (bool with_scale : {false, true}) {
      INFO(dtype_name(dtype) << (with_scale ? " with" : " without") << " a per-sample scale");
      const Tensor x = randn_of({3, 5, 7}, 1, dtype), f = randn_of({3, 5, 7}, 2, dtype);
      const Tensor gamma = randn_of({7}, 3, dtype), g = randn_of({3, 5, 7}, 4, dtype);
      // Stochastic depth's scale: a dropped sample (0) and kept ones (1/(1-p)).
      const Tensor s = with_scale ? from_vector(std::vector<double>{0.0, 1.25, 1.25}, {3}).to(dtype) : Tensor();
      const auto fused =
          run([&](const auto& v) { return layer_scale_residual(v[0], v[1], v[2], s); }, {x, f, gamma}, g);
      const auto reference =
          run([&](const auto& v) { return layer_scale_reference(v[0], v[1], v[2], s); }, {x, f, gamma}, g);
      check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
    }
  }
}

TEST_CASE("linear_gelu equals gelu(linear(x, W, b)), values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (bool approximate : {false, true}) {
      INFO(dtype_name(dtype) << (approximate ? " tanh" : " erf") << " GELU");
      const Tensor x = randn_of({2, 5, 8}, 1, dtype), w = randn_of({12, 8}, 2, dtype), b = randn_of({12}, 3, dtype);
      const Tensor g = randn_of({2, 5, 12}, 4, dtype);
      const auto fused = run([&](const auto& v) { return linear_gelu(v[0], v[1], v[2], approximate); }, {x, w, b}, g);
      const auto reference =
          run([&](const auto& v) { return gelu(linear(v[0], v[1], v[2]), approximate); }, {x, w, b}, g);
      check_same_results(fused, reference, dtype == DType::Float32 ? 2e-5 : 1e-12);
    }
  }
}

TEST_CASE("depthwise_conv2d_gelu equals gelu(conv2d(x, w, b, groups = C)), values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool tokens : {false, true}) {
      INFO(dtype_name(dtype) << (tokens ? ", a token map (channels innermost)" : ", NCHW"));
      // A token map [2, 5·6, 4] seen as [2, 4, 5, 6], as XCiT's LPI takes it, or a plain NCHW map.
      const Tensor x = tokens ? randn_of({2, 30, 4}, 1, dtype) : randn_of({2, 4, 5, 6}, 1, dtype);
      const auto map = [tokens](const Tensor& t) { return tokens ? t.transpose(1, 2).reshape({2, 4, 5, 6}) : t; };
      const Tensor w = randn_of({4, 1, 3, 3}, 2, dtype), b = randn_of({4}, 3, dtype),
                   g = randn_of({2, 4, 5, 6}, 4, dtype);
      const auto fused = run(
          [&](const auto& v) {
            return depthwise_conv2d_gelu(map(v[0]), v[1], v[2], {1, 1}, {1, 1});
          },
          {x, w, b}, g);
      const auto reference = run(
          [&](const auto& v) {
            return gelu(conv2d(map(v[0]), v[1], v[2], {1, 1}, {1, 1}, {1, 1}, 4));
          },
          {x, w, b}, g);
      check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
    }
}

TEST_CASE("depthwise_conv2d_gelu reads a token map as it lies; writes NCHW for a backward, else as x lies", "[fused]") {
  const Tensor tokens = randn_of({2, 30, 4}, 1, DType::Float32), w = randn_of({4, 1, 3, 3}, 2, DType::Float32);
  const auto map = [](const Tensor& t) { return t.transpose(1, 2).reshape({2, 4, 5, 6}); };
  testing::KernelCalls calls;
  const Tensor inference = depthwise_conv2d_gelu(map(tokens), w, Tensor(), {1, 1}, {1, 1});
  CHECK(inference.strides() == map(tokens).strides());  // channels-last: tokens again as a view
  const Tensor training =
      depthwise_conv2d_gelu(map(tokens.detach().set_requires_grad(true)), w, Tensor(), {1, 1}, {1, 1});
  CHECK(training.is_contiguous());  // BatchNorm's training statistics read NCHW planes
  CHECK(calls.calls.count("copy") == 0);
  CHECK(max_abs_diff(inference, training) == 0);
}

// LPI in inference: BatchNorm in eval takes the channels-last map as [N·H·W, C] rows and keeps
// its layout, with the values of the NCHW computation.
TEST_CASE("batch_norm in eval keeps a channels-last map's layout", "[fused]") {
  const Tensor x = randn_of({2, 5, 3, 4}, 3, DType::Float32).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  nn::BatchNorm2d bn(5);
  bn.running_mean.copy_(randn_of({5}, 4, DType::Float32));
  bn.running_var.copy_(abs(randn_of({5}, 5, DType::Float32)) + 0.5);
  bn.weight.detach().copy_(randn_of({5}, 6, DType::Float32));
  bn.eval();
  const Tensor y = bn.forward(x);
  CHECK(y.strides() == x.strides());
  CHECK(max_abs_diff(y, bn.forward(x.contiguous())) < 1e-6);
}

namespace {

// A layer's output, its input's gradient and its parameters' gradients after one forward and backward
// with `lever` set to `on` (the input and the upstream gradient from fixed seeds, of one shape).
template <class Forward>
std::vector<Tensor> layer_results(bool Levers::*lever, bool on, nn::Module& layer, const Shape& shape,
                                  const Forward& forward) {
  ScopedLever scoped(lever, on);
  layer.zero_grad();
  const Tensor x = randn_of(shape, 1, DType::Float32).set_requires_grad(true);
  const Tensor y = forward(x);
  y.backward(randn_of(shape, 2, DType::Float32));
  std::vector<Tensor> out{y.detach(), x.grad()};
  for (const Tensor& p : layer.parameters()) out.push_back(p.grad().clone());
  return out;
}

}  // namespace

TEST_CASE("LPI's output and gradients are the same with TESSERA_FUSED_DEPTHWISE_GELU on and off", "[fused]") {
  nn::LPI lpi(6);
  auto run_layer = [&](bool fused) {
    return layer_results(&Levers::fused_depthwise_gelu, fused, lpi, {2, 12, 6},
                         [&](const Tensor& x) { return lpi.forward(x, 3, 4); });
  };
  check_same_results(run_layer(true), run_layer(false), 1e-5);
}

// XCA's map as the composition it replaces (nn/xca.cpp before the fused op).
Tensor xca_reference(const Tensor& q, const Tensor& k, const Tensor& t) {
  return softmax(matmul(normalize(q, -1), normalize(k, -1).transpose(-2, -1)) * t, -1);
}

TEST_CASE("xca_attention_map equals softmax(normalize(q)·normalize(k)ᵀ·t), values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    // [B, h, d, N] from a [B, N, 2, h, d] projection, as XCA slices its qkv: strided q and k.
    const Tensor qk = randn_of({2, 9, 2, 3, 5}, 1, dtype).permute({2, 0, 3, 4, 1});
    const Tensor t = randn_of({3, 1, 1}, 2, dtype), g = randn_of({2, 3, 5, 5}, 3, dtype);
    const auto fused =
        run([&](const auto& v) { return xca_attention_map(v[0].select(0, 0), v[0].select(0, 1), v[1]); }, {qk, t}, g);
    const auto reference =
        run([&](const auto& v) { return xca_reference(v[0].select(0, 0), v[0].select(0, 1), v[1]); }, {qk, t}, g);
    check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
  }
}

// The float64 gradient checks of the fused ops are samples of the op table
// (tests/op_samples/fused.cpp); what stays here compares each with the composition it replaces.
TEST_CASE("xca_attention_map at a channel that is zero over every token equals the composition", "[fused]") {
  // Its norm is clamped to eps, as F.normalize does, and the gradient stays finite (of the order
  // of 1/eps): finite differences would step across the clamp's kink.
  auto map = [](const std::vector<Tensor>& v) { return xca_attention_map(v[0], v[1], v[2]); };
  Tensor qz = leaf({1, 2, 3, 4}, -1, 1, 6).detach();
  qz.narrow(2, 1, 1).zero_();
  qz.set_requires_grad(true);
  const Tensor kz = leaf({1, 2, 3, 4}, -1, 1, 7), tz = leaf({2, 1, 1}, 0.5, 2, 8);
  const Tensor gz = randn_of({1, 2, 3, 3}, 9, DType::Float64);
  check_same_results(run(map, {qz, kz, tz}, gz),
                     run([](const auto& v) { return xca_reference(v[0], v[1], v[2]); }, {qz, kz, tz}, gz), 1e-12);
}

// XCA from its qkv projection as the composed ops compute it (nn/xca.cpp with TESSERA_FUSED_XCA=0).
Tensor xca_composed(const Tensor& qkv, const Tensor& t, int64_t heads) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  const std::vector<Tensor> parts = unbind(qkv.reshape({B, N, 3, heads, C / heads}).permute({2, 0, 3, 4, 1}), 0);
  return matmul(xca_attention_map(parts[0], parts[1], t), parts[2]).permute({0, 3, 1, 2}).reshape({B, N, C});
}

TEST_CASE("xca_attention equals xca_attention_map, ·v and the tokens' layout, values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    const Tensor qkv = randn_of({2, 9, 3 * 3 * 5}, 1, dtype), t = randn_of({3, 1, 1}, 2, dtype);
    const Tensor g = randn_of({2, 9, 15}, 3, dtype);
    const auto fused = run([](const auto& v) { return xca_attention(v[0], v[1], 3); }, {qkv, t}, g);
    const auto reference = run([](const auto& v) { return xca_composed(v[0], v[1], 3); }, {qkv, t}, g);
    check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
  }
}

TEST_CASE("xca_attention hands out the map it computes: xca_attention_map's", "[fused]") {
  const Tensor qkv = randn_of({2, 6, 3 * 2 * 4}, 4, DType::Float64), t = randn_of({2, 1, 1}, 5, DType::Float64);
  Tensor map;
  xca_attention(qkv, t, 2, 1e-12, &map);
  const std::vector<Tensor> parts = unbind(qkv.reshape({2, 6, 3, 2, 4}).permute({2, 0, 3, 4, 1}), 0);
  CHECK(max_abs_diff(map, xca_attention_map(parts[0], parts[1], t)) <= 1e-14);
}

TEST_CASE("XCA's output and gradients are the same with TESSERA_FUSED_XCA on and off", "[fused]") {
  nn::XCA xca(24, 3);
  {
    // A temperature per head other than timm's initial 1, so that each head's own is used.
    NoGradGuard no_grad;
    xca.temperature.copy_(randn_of({3, 1, 1}, 6, DType::Float32));
  }
  auto run_layer = [&](bool fused) {
    return layer_results(&Levers::fused_xca, fused, xca, {2, 7, 24}, [&](const Tensor& x) { return xca.forward(x); });
  };
  check_same_results(run_layer(true), run_layer(false), 1e-5);
}

// The composition factor_attention_merge stands for: (scale·m + pad(q_img ⊙ cv)) in token layout.
Tensor merge_reference(const Tensor& m, const Tensor& q, const Tensor& cv, double scale) {
  const int64_t B = m.size(0), h = m.size(1), N = m.size(2), d = m.size(3);
  const Tensor ev = pad(q.narrow(2, 1, N - 1) * cv, {0, 0, 1, 0});
  return (m * scale + ev).transpose(1, 2).reshape({B, N, h * d});
}

TEST_CASE("factor_attention_merge equals scale·m + pad(q ⊙ cv) in token layout, values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    // q as CoaT slices it from its qkv projection [B, N, 3, h, d]: a strided view.
    const Tensor qkv = randn_of({2, 7, 3, 3, 4}, 1, dtype);
    const Tensor m = randn_of({2, 3, 7, 4}, 2, dtype), cv = randn_of({2, 3, 4, 6}, 3, dtype).transpose(-1, -2);
    const Tensor g = randn_of({2, 7, 12}, 4, dtype);
    auto q_of = [](const Tensor& t) { return t.permute({2, 0, 3, 1, 4}).select(0, 0); };
    const auto fused =
        run([&](const auto& v) { return factor_attention_merge(v[0], q_of(v[1]), v[2], 0.5); }, {m, qkv, cv}, g);
    const auto reference =
        run([&](const auto& v) { return merge_reference(v[0], q_of(v[1]), v[2], 0.5); }, {m, qkv, cv}, g);
    check_same_results(fused, reference, dtype == DType::Float32 ? 1e-6 : 1e-14);
  }
}

// CoaT's attention from its qkv projection as the composed ops compute it (nn/conv_attention.cpp
// with TESSERA_FUSED_FACTOR_ATTENTION=0): softmax(k) over the tokens, the d×d context, q·context,
// then factor_attention_merge.
Tensor factor_composed(const Tensor& qkv, const Tensor& cv, int64_t heads, double scale) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  const std::vector<Tensor> p = unbind(qkv.reshape({B, N, 3, heads, C / heads}).permute({2, 0, 3, 1, 4}), 0);
  return factor_attention_merge(matmul(p[0], matmul(softmax(p[1], 2).transpose(-1, -2), p[2])), p[0], cv, scale);
}

TEST_CASE("factor_attention equals softmax over the tokens, kᵀv, q·kv and the merge, values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    // cv as CRPE's convolution hands it over: stored [B, h, d, N−1].
    const Tensor qkv = randn_of({2, 9, 3 * 3 * 4}, 1, dtype), cv = randn_of({2, 3, 4, 8}, 2, dtype).transpose(-1, -2);
    const Tensor g = randn_of({2, 9, 12}, 3, dtype);
    const auto fused = run([](const auto& v) { return factor_attention(v[0], v[1], 3, 0.5); }, {qkv, cv}, g);
    const auto reference = run([](const auto& v) { return factor_composed(v[0], v[1], 3, 0.5); }, {qkv, cv}, g);
    check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
  }
}

TEST_CASE("FactorAttnConvRelPosEnc gives the same output and gradients with the fused op on and off", "[fused]") {
  auto crpe = std::make_shared<nn::ConvRelPosEnc>(4, 3, std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {5, 1}});
  nn::FactorAttnConvRelPosEnc attn(12, 3, crpe);
  auto run_layer = [&](bool fused) {
    return layer_results(&Levers::fused_factor_attention, fused, attn, {2, 13, 12},
                         [&](const Tensor& x) { return attn.forward(x, 3, 4); });
  };
  check_same_results(run_layer(true), run_layer(false), 1e-5);
}

// The compositions class_attention and xnorm_matmul stand for.
Tensor class_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  return matmul(softmax(matmul(q * scale, k.transpose(-2, -1)), -1), v);
}
Tensor xnorm_matmul_reference(const Tensor& q, const Tensor& ctx, const Tensor& gamma) {
  return matmul(gamma * normalize(q, -1), ctx);
}

TEST_CASE("class_attention equals softmax(scale·q·kᵀ)·v, values, weights and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    // k and v as CaiT slices them from their projections [B, N, h, d]: strided views.
    const Tensor q = randn_of({2, 3, 1, 4}, 1, dtype), k = randn_of({2, 9, 3, 4}, 2, dtype);
    const Tensor v = randn_of({2, 9, 3, 4}, 3, dtype), g = randn_of({2, 3, 1, 4}, 4, dtype);
    Tensor weights;
    const auto fused = run(
        [&](const auto& in) {
          return class_attention(in[0], in[1].transpose(1, 2), in[2].transpose(1, 2), 0.5, &weights);
        },
        {q, k, v}, g);
    const auto reference = run(
        [&](const auto& in) {
          return class_attention_reference(in[0], in[1].transpose(1, 2), in[2].transpose(1, 2), 0.5);
        },
        {q, k, v}, g);
    check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
    const Tensor expected = softmax(matmul(q * 0.5, k.transpose(1, 2).transpose(-2, -1)), -1);
    REQUIRE(weights.shape() == Shape{2, 3, 1, 9});
    CHECK(max_abs_diff(weights, expected) <= (dtype == DType::Float32 ? 1e-6 : 1e-14));
  }
}

TEST_CASE("class_attention with scores beyond exp's range stays finite and equals the composition", "[fused]") {
  // The max is subtracted first, so nothing overflows.
  const Tensor q = full({1, 1, 1, 2}, 30.0, DType::Float32), k = randn_of({1, 1, 6, 2}, 10, DType::Float32) * 20.0;
  const Tensor y = class_attention(q, k, k, 1.0);
  CHECK(std::isfinite(amax(abs(y)).item()));
  CHECK(max_abs_diff(y, class_attention_reference(q, k, k, 1.0)) <= 1e-4);
}

TEST_CASE("xnorm_matmul equals (gamma·normalize(q))·ctx, values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    // q as UFO-ViT slices it from its qkv projection [B, N, 3, h, d]: a strided view.
    const Tensor qkv = randn_of({2, 7, 3, 3, 4}, 1, dtype), ctx = randn_of({2, 3, 4, 5}, 2, dtype);
    const Tensor gamma = randn_of({3, 1, 1}, 3, dtype), g = randn_of({2, 3, 7, 5}, 4, dtype);
    auto q_of = [](const Tensor& t) { return t.permute({2, 0, 3, 1, 4}).select(0, 0); };
    const auto fused = run([&](const auto& v) { return xnorm_matmul(q_of(v[0]), v[1], v[2]); }, {qkv, ctx, gamma}, g);
    const auto reference =
        run([&](const auto& v) { return xnorm_matmul_reference(q_of(v[0]), v[1], v[2]); }, {qkv, ctx, gamma}, g);
    check_same_results(fused, reference, dtype == DType::Float32 ? 1e-5 : 1e-12);
  }
  // The result is a view of token-layout storage: merging the heads copies nothing.
  const Tensor y = xnorm_matmul(randn({2, 3, 7, 4}), randn({2, 3, 4, 5}), ones({3, 1, 1}));
  CHECK(y.transpose(1, 2).is_contiguous());
}

TEST_CASE("xnorm_matmul at a zero query equals the composition", "[fused]") {
  // Its norm is clamped to eps (F.normalize), its row of the output is 0.
  auto product = [](const std::vector<Tensor>& v) { return xnorm_matmul(v[0], v[1], v[2]); };
  Tensor qz = leaf({1, 2, 4, 3}, -1, 1, 7).detach();
  qz.narrow(2, 1, 1).zero_();
  qz.set_requires_grad(true);
  const Tensor cz = leaf({1, 2, 3, 3}, -1, 1, 8), gz = leaf({2, 1, 1}, 0.5, 2, 9);
  const Tensor up = randn_of({1, 2, 4, 3}, 10, DType::Float64);
  check_same_results(run(product, {qz, cz, gz}, up),
                     run([](const auto& v) { return xnorm_matmul_reference(v[0], v[1], v[2]); }, {qz, cz, gz}, up),
                     1e-12);
}

// CaiT's talking-heads attention as timm writes it: the heads moved last for each mixing (a Linear).
Tensor talking_heads_reference(const Tensor& qkv, int64_t h, double scale, const Tensor& w_l, const Tensor& b_l,
                               const Tensor& w_w, const Tensor& b_w) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  const std::vector<Tensor> parts = unbind(qkv.reshape({B, N, 3, h, C / h}).permute({2, 0, 3, 1, 4}), 0);
  auto mix = [](const Tensor& maps, const Tensor& w, const Tensor& b) {
    return linear(maps.permute({0, 2, 3, 1}), w, b).permute({0, 3, 1, 2});
  };
  const Tensor attn = mix(softmax(mix(matmul(parts[0] * scale, parts[1].transpose(-2, -1)), w_l, b_l), -1), w_w, b_w);
  return matmul(attn, parts[2]).transpose(1, 2).reshape({B, N, C});
}

TEST_CASE("talking_heads_attention equals timm's composition, values and gradients", "[fused]") {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool biases : {true, false}) {
      INFO(dtype_name(dtype) << (biases ? " with" : " without") << " biases");
      // qkv as a slice of wider rows (its row stride is not 3·C), 3 heads of 4 channels, 19 tokens.
      const Tensor wide = randn_of({2, 19, 40}, 1, dtype), g = randn_of({2, 19, 12}, 2, dtype);
      std::vector<Tensor> values{wide, randn_of({3, 3}, 3, dtype), randn_of({3, 3}, 4, dtype)};
      if (biases) values.insert(values.end(), {randn_of({3}, 5, dtype), randn_of({3}, 6, dtype)});
      auto with = [&](const auto& op) {
        return [&, op](const std::vector<Tensor>& v) {
          const Tensor none;
          return op(v[0].narrow(2, 2, 36), 3, 0.5, v[1], biases ? v[3] : none, v[2], biases ? v[4] : none);
        };
      };
      check_same_results(run(with(talking_heads_attention), values, g), run(with(talking_heads_reference), values, g),
                         dtype == DType::Float32 ? 1e-5 : 1e-12);
    }
}

TEST_CASE("TalkingHeadAttention gives the same output and gradients with the fused op on and off", "[fused]") {
  nn::TalkingHeadAttention attn(12, 3);
  auto run_layer = [&](bool fused) {
    return layer_results(&Levers::fused_talking_heads, fused, attn, {2, 9, 12},
                         [&](const Tensor& x) { return attn.forward(x); });
  };
  check_same_results(run_layer(true), run_layer(false), 1e-5);
}

TEST_CASE("fused ops on empty inputs give empty outputs and zero parameter gradients", "[fused]") {
  const Tensor x = zeros({0, 4}).set_requires_grad(true), f = zeros({0, 4}).set_requires_grad(true);
  const Tensor gamma = ones({4}).set_requires_grad(true);
  Tensor y = layer_scale_residual(x, f, gamma);
  CHECK(y.shape() == Shape{0, 4});
  y.sum().backward();
  REQUIRE(gamma.grad().defined());
  CHECK(gamma.grad().to_vector<float>() == std::vector<float>(4, 0.0f));

  const Tensor w = ones({3, 4}).set_requires_grad(true), b = ones({3}).set_requires_grad(true);
  Tensor h = linear_gelu(x, w, b);
  CHECK(h.shape() == Shape{0, 3});
  h.sum().backward();
  REQUIRE(b.grad().defined());
  CHECK(b.grad().to_vector<float>() == std::vector<float>(3, 0.0f));
  CHECK(w.grad().to_vector<float>() == std::vector<float>(12, 0.0f));

  const Tensor maps = zeros({0, 3, 4, 4}).set_requires_grad(true);
  const Tensor dw = ones({3, 1, 3, 3}).set_requires_grad(true), db = ones({3}).set_requires_grad(true);
  Tensor m = depthwise_conv2d_gelu(maps, dw, db, {1, 1}, {1, 1});
  CHECK(m.shape() == Shape{0, 3, 4, 4});
  m.sum().backward();
  REQUIRE(db.grad().defined());
  CHECK(db.grad().to_vector<float>() == std::vector<float>(3, 0.0f));
  CHECK(dw.grad().to_vector<float>() == std::vector<float>(27, 0.0f));
}

TEST_CASE("fused ops refuse bad arguments with messages that name the op and the shapes", "[fused]") {
  const Tensor x = zeros({2, 3, 4}), f = zeros({2, 3, 4});
  CHECK_THROWS_WITH(layer_scale_residual(x, f, zeros({3})),
                    Catch::Contains("layer_scale_residual: expected gamma [4]"));
  CHECK_THROWS_WITH(layer_scale_residual(x, zeros({2, 3, 5}), zeros({4})), Catch::Contains("must have one shape"));
  CHECK_THROWS_WITH(layer_scale_residual(x, f, zeros({4}), zeros({3})), Catch::Contains("expected sample_scale [2]"));
  CHECK_THROWS_WITH(layer_scale_residual(x, f, zeros({4}, DType::Float64)), Catch::Contains("gamma is"));
  CHECK_THROWS_WITH(layer_scale_residual(x, f, zeros({4}), ones({2}).set_requires_grad(true)),
                    Catch::Contains("must not require grad"));
  CHECK_THROWS_WITH(layer_scale_residual(zeros({4}, DType::Int64), zeros({4}, DType::Int64), zeros({4}, DType::Int64)),
                    Catch::Contains("expected floating tensors"));
  CHECK_THROWS_WITH(linear_gelu(x, zeros({5, 3}), zeros({5})),
                    Catch::Contains("linear_gelu: input [2, 3, 4] does not fit weight"));
  CHECK_THROWS_WITH(linear_gelu(x, zeros({5, 4}), zeros({4})), Catch::Contains("linear_gelu: expected bias [5]"));
  CHECK_THROWS_WITH(xca_attention_map(zeros({2, 3, 4, 5}), zeros({2, 3, 4, 6}), zeros({3, 1, 1})),
                    Catch::Contains("xca_attention_map: expected q and k of one shape [B, h, d, N]"));
  CHECK_THROWS_WITH(xca_attention_map(zeros({2, 3, 4, 5}), zeros({2, 3, 4, 5}), zeros({3})),
                    Catch::Contains("expected temperature [3, 1, 1]"));
  CHECK_THROWS_WITH(xca_attention_map(zeros({2, 3, 4, 5}), zeros({2, 3, 4, 5}), zeros({3, 1, 1}), 0.0),
                    Catch::Contains("eps must be finite and > 0"));
  CHECK_THROWS_WITH(linear_gelu(x, zeros({5, 4}), Tensor()), Catch::Contains("undefined tensor"));
  CHECK_THROWS_WITH(
      depthwise_conv2d_gelu(zeros({2, 4, 5, 5}), zeros({8, 1, 3, 3})),
      Catch::Contains("depthwise_conv2d_gelu: expected weight [4, 1, kH, kW]") && Catch::Contains("[8, 1, 3, 3]"));
  CHECK_THROWS_WITH(depthwise_conv2d_gelu(zeros({2, 4, 5, 5}), zeros({4, 2, 3, 3})),
                    Catch::Contains("depthwise_conv2d_gelu: expected weight [O, C/groups, kH, kW] with C/groups = 1"));
  CHECK_THROWS_WITH(depthwise_conv2d_gelu(zeros({4, 5, 5}), zeros({4, 1, 3, 3})),
                    Catch::Contains("depthwise_conv2d_gelu: expected input [N, C, H, W], got [4, 5, 5]"));
  CHECK_THROWS_WITH(depthwise_conv2d_gelu(zeros({2, 4, 5, 5}), zeros({4, 1, 3, 3}), zeros({3})),
                    Catch::Contains("depthwise_conv2d_gelu: expected bias [4]"));
  CHECK_THROWS_WITH(xca_attention(zeros({2, 5, 20}), zeros({2, 1, 1}), 2),
                    Catch::Contains("xca_attention: expected qkv [B, N, 3·h·d] with h = 2 heads"));
  CHECK_THROWS_WITH(xca_attention(zeros({2, 5, 24}), zeros({4, 1, 1}), 2),
                    Catch::Contains("xca_attention: expected temperature [2, 1, 1] for 2 heads"));
  CHECK_THROWS_WITH(xca_attention(zeros({2, 5, 24}), zeros({2, 1, 1}), 0), Catch::Contains("num_heads must be > 0"));
  CHECK_THROWS_WITH(factor_attention(zeros({2, 5, 20}), zeros({2, 2, 4, 3}), 2, 1.0),
                    Catch::Contains("factor_attention: expected qkv [B, N, 3·h·d] with N >= 1"));
  CHECK_THROWS_WITH(factor_attention(zeros({2, 5, 24}), zeros({2, 2, 5, 4}), 2, 1.0),
                    Catch::Contains("factor_attention: expected cv [2, 2, 4, 4]"));
  CHECK_THROWS_WITH(factor_attention(zeros({2, 5, 24}), zeros({2, 2, 4, 4}), 0, 1.0),
                    Catch::Contains("num_heads must be > 0"));
  CHECK_THROWS_WITH(factor_attention_merge(zeros({2, 3, 5, 4}), zeros({2, 3, 5, 3}), zeros({2, 3, 4, 4}), 1.0),
                    Catch::Contains("factor_attention_merge: expected m and q of one shape [B, h, N, d]"));
  CHECK_THROWS_WITH(factor_attention_merge(zeros({2, 3, 5, 4}), zeros({2, 3, 5, 4}), zeros({2, 3, 5, 4}), 1.0),
                    Catch::Contains("expected cv [2, 3, 4, 4]"));
  CHECK_THROWS_WITH(class_attention(zeros({2, 3, 1, 4}), zeros({2, 3, 5, 4}), zeros({2, 3, 6, 4}), 1.0),
                    Catch::Contains("class_attention: expected k and v of one shape [B, h, N, d]"));
  CHECK_THROWS_WITH(class_attention(zeros({2, 3, 2, 4}), zeros({2, 3, 5, 4}), zeros({2, 3, 5, 4}), 1.0),
                    Catch::Contains("expected q [2, 3, 1, 4]"));
  CHECK_THROWS_WITH(class_attention(zeros({2, 3, 1, 4}), zeros({2, 3, 0, 4}), zeros({2, 3, 0, 4}), 1.0),
                    Catch::Contains("with N >= 1"));
  CHECK_THROWS_WITH(xnorm_matmul(zeros({2, 3, 5, 4}), zeros({2, 3, 5, 4}), zeros({3, 1, 1})),
                    Catch::Contains("xnorm_matmul: expected q [B, h, N, d] and ctx [B, h, d, e]"));
  CHECK_THROWS_WITH(xnorm_matmul(zeros({2, 3, 5, 4}), zeros({2, 3, 4, 4}), zeros({3})),
                    Catch::Contains("expected gamma [3, 1, 1]"));
  CHECK_THROWS_WITH(
      talking_heads_attention(zeros({2, 5, 10}), 2, 1.0, zeros({2, 2}), Tensor(), zeros({2, 2}), Tensor()),
      Catch::Contains("talking_heads_attention: expected qkv [B, N, 3·C] with N >= 1, got [2, 5, 10]"));
  CHECK_THROWS_WITH(
      talking_heads_attention(zeros({2, 5, 12}), 3, 1.0, zeros({3, 3}), Tensor(), zeros({3, 3}), Tensor()),
      Catch::Contains("C = 4 (qkv [2, 5, 12]) is not divisible by num_heads 3"));
  CHECK_THROWS_WITH(
      talking_heads_attention(zeros({2, 5, 12}), 2, 1.0, zeros({2, 2}), zeros({3}), zeros({2, 2}), Tensor()),
      Catch::Contains("expected b_l [2] (num_heads 2), got [3]"));
  CHECK_THROWS_WITH(
      talking_heads_attention(zeros({2, 5, 12}), 2, 1.0, zeros({2, 2}), Tensor(), zeros({2, 3}), Tensor()),
      Catch::Contains("expected w_w [2, 2] (num_heads 2), got [2, 3]"));
}
