// softmax / log_softmax: values against a naive loop over every dim (contiguous rows, strided
// middle dims, wide inner dims that span several column chunks), identities (rows sum to 1,
// exp(log_softmax) = softmax, shift invariance), extreme inputs and errors. The float64 gradient
// checks (last, middle and first dims, non-contiguous inputs and upstream gradients) are samples of
// the op table, tests/op_samples/softmax.cpp.
#include <cmath>

#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Naive max-subtracted (log-)softmax of a float64 tensor along dim, in long double.
std::vector<double> reference(const Tensor& x, int64_t dim, bool log_space) {
  std::vector<double> v = x.to_vector<double>();
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= s[d];
  const int64_t n = s[dim];
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + i; };
      long double m = v[at(0)], se = 0;
      for (int64_t k = 1; k < n; ++k) m = std::max<long double>(m, v[at(k)]);
      for (int64_t k = 0; k < n; ++k) se += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        out[at(k)] = static_cast<double>(log_space ? v[at(k)] - m - std::log(se) : std::exp(v[at(k)] - m) / se);
    }
  return out;
}

Tensor random(const Shape& shape, double scale, uint64_t seed, DType dtype = DType::Float64) {
  Generator gen(seed);
  return randn(shape, DType::Float64, &gen).to(dtype) * scale;
}

}  // namespace

TEST_CASE("softmax and log_softmax match a naive reference on every dim", "[softmax]") {
  // [2, 3, 300]: dim 2 is a contiguous row; dim 1 has inner 300 > one column chunk; dim 0 has
  // inner 900.
  Tensor x = random({2, 3, 300}, 3.0, 1);
  for (int64_t dim : {0, 1, 2}) {
    INFO("dim " << dim);
    CHECK(max_abs_diff(softmax(x, dim).to_vector<double>(), reference(x, dim, false)) < 1e-14);
    CHECK(max_abs_diff(log_softmax(x, dim).to_vector<double>(), reference(x, dim, true)) < 1e-12);
    CHECK(max_abs_diff(softmax(x, dim - 3).to_vector<double>(), reference(x, dim, false)) < 1e-14);  // negative dim
  }
  // CoaT-style k.softmax(dim=2) on [B, h, N, d]; narrow inner dims are walked several rows at a
  // time, including a final partial group of rows (100 = 3·32 + 4 rows for d = 8).
  for (Shape shape : {Shape{2, 3, 7, 5}, Shape{2, 2, 100, 8}, Shape{1, 3, 37, 30}}) {
    INFO("shape " << shape_str(shape));
    Tensor x4 = random(shape, 2.0, 2);
    CHECK(max_abs_diff(softmax(x4, 2).to_vector<double>(), reference(x4, 2, false)) < 1e-14);
    CHECK(max_abs_diff(log_softmax(x4, 2).to_vector<double>(), reference(x4, 2, true)) < 1e-12);
  }
}

TEST_CASE("softmax identities: rows sum to one, exp(log_softmax), shift invariance", "[softmax]") {
  Tensor x = random({5, 4, 9}, 4.0, 3);
  for (int64_t dim : {1, 2}) {
    INFO("dim " << dim);
    Tensor y = softmax(x, dim);
    std::vector<double> sums = sum(y, {dim}).to_vector<double>();
    for (double s : sums) CHECK(s == Approx(1.0).epsilon(1e-14));
    CHECK(max_abs_diff(exp(log_softmax(x, dim)), y) < 1e-14);
    CHECK(max_abs_diff(softmax(x + 1000.0, dim), y) < 1e-12);  // x + 1000 itself rounds at ~1e-13
    CHECK(max_abs_diff(log_softmax(x - 500.0, dim), log_softmax(x, dim)) < 1e-11);
  }
}

TEST_CASE("softmax handles extreme magnitudes without overflow", "[softmax]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dt));
    Tensor x = from_vector(std::vector<double>{1e4, -1e4, 0, 1e4 - 1, -2e4, 3e4, 3e4, -3e4}, {2, 4}).to(dt);
    std::vector<double> y = softmax(x, 1).to_vector<double>(), ly = log_softmax(x, 1).to_vector<double>();
    const double e = std::exp(-1.0);
    std::vector<double> expect{1 / (1 + e), 0, 0, e / (1 + e), 0, 0.5, 0.5, 0};
    for (size_t i = 0; i < y.size(); ++i) {
      CHECK(std::isfinite(y[i]));
      CHECK(y[i] == Approx(expect[i]).margin(1e-6));
      CHECK(std::isfinite(ly[i]));
    }
    CHECK(ly[1] == Approx(-2e4 - std::log1p(e)).epsilon(1e-6));  // x − lse, lse = 1e4 + log(1 + e⁻¹)
    CHECK(ly[5] == Approx(-std::log(2.0)).margin(1e-6));
  }
}

TEST_CASE("softmax on non-contiguous inputs, 0-d and empty tensors", "[softmax]") {
  Tensor x = random({6, 5}, 2.0, 4);
  CHECK(max_abs_diff(softmax(x.t(), 0), softmax(x, 1).t()) < 1e-15);
  CHECK(max_abs_diff(log_softmax(x.t(), 1), log_softmax(x, 0).t()) < 1e-15);
  CHECK(max_abs_diff(softmax(x.slice(1, 0, 5, 2), 1), softmax(x.slice(1, 0, 5, 2).contiguous(), 1)) < 1e-15);
  CHECK(softmax(scalar_tensor(3.0), 0).item() == 1.0);
  CHECK(log_softmax(scalar_tensor(3.0), -1).item() == 0.0);
  CHECK(softmax(zeros({0, 4}), 1).shape() == Shape{0, 4});
  CHECK(softmax(zeros({3, 0}), 1).shape() == Shape{3, 0});
}

TEST_CASE("float32 softmax agrees with float64 on large tensors (parallel paths)", "[softmax]") {
  for (auto [shape, dim] :
       std::vector<std::pair<Shape, int64_t>>{{{300, 197}, 1}, {{4, 197, 300}, 1}, {{3, 40, 7}, 1}}) {
    Tensor x = random(shape, 3.0, 5);
    Tensor x32 = x.to(DType::Float32);
    CHECK(max_abs_diff(softmax(x32, dim).to(DType::Float64), softmax(x, dim)) < 1e-6);
    CHECK(max_abs_diff(log_softmax(x32, dim).to(DType::Float64), log_softmax(x, dim)) < 1e-5);
  }
}

TEST_CASE("softmax errors", "[softmax][errors]") {
  CHECK_THROWS_WITH(softmax(zeros({2, 3}), 2), Catch::Contains("softmax") && Catch::Contains("dim 2"));
  CHECK_THROWS_WITH(log_softmax(zeros({2, 3}), -3), Catch::Contains("log_softmax") && Catch::Contains("dim -3"));
  CHECK_THROWS_WITH(softmax(arange(4), 0), Catch::Contains("softmax") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(softmax(Tensor(), 0), Catch::Contains("softmax") && Catch::Contains("undefined"));
}
