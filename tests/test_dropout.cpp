// dropout: identity when p == 0 or not training, zeros for p == 1, the kept fraction and the
// 1/(1−p) scaling on a large tensor, determinism for a seed, the gradient (same mask) and errors.
#include <cmath>

#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("dropout is the identity when p == 0 or in eval mode", "[dropout]") {
  Generator gen(1);
  Tensor x = randn({4, 5}, DType::Float32, &gen);
  CHECK(dropout(x, 0.0, true, &gen).is_same(x));
  CHECK(dropout(x, 0.7, false, &gen).is_same(x));
  Tensor z = dropout(x, 1.0, true, &gen);
  CHECK(z.shape() == x.shape());
  CHECK(z.to_vector<double>() == std::vector<double>(20, 0.0));
}

TEST_CASE("dropout keeps about 1−p of the elements, scaled by 1/(1−p)", "[dropout]") {
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p = " << p);
    Generator gen(42);
    const int64_t n = 200000;
    Tensor x = ones({n}, DType::Float32);
    std::vector<double> y = dropout(x, p, true, &gen).to_vector<double>();
    int64_t kept = 0, badly_scaled = 0;
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    for (double v : y) {
      kept += v != 0.0;
      badly_scaled += v != 0.0 && v != scale;
    }
    CHECK(badly_scaled == 0);
    // Binomial(n, 1−p): 5 standard deviations.
    const double expect = n * (1 - p), sd = std::sqrt(n * p * (1 - p));
    CHECK(std::abs(kept - expect) < 5 * sd);
  }
}

TEST_CASE("dropout is deterministic for a seed and works on non-contiguous float64 input", "[dropout]") {
  Generator g1(7), g2(7), g3(8);
  Tensor x = randn({6, 8}, DType::Float64, &g3).t();
  Tensor a = dropout(x, 0.3, true, &g1), b = dropout(x, 0.3, true, &g2);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(a.dtype() == DType::Float64);
  CHECK(a.shape() == Shape{8, 6});
  Tensor c = dropout(x, 0.3, true, &g1);  // the generator advanced: another mask
  CHECK(a.to_vector<double>() != c.to_vector<double>());
  std::vector<double> xv = x.to_vector<double>(), av = a.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) CHECK((av[i] == 0.0 || av[i] == Approx(xv[i] / 0.7)));
  // The default generator is used when none is given, and manual_seed makes it reproducible.
  manual_seed(3);
  Tensor d = dropout(x, 0.5, true);
  manual_seed(3);
  CHECK(dropout(x, 0.5, true).to_vector<double>() == d.to_vector<double>());
}

TEST_CASE("dropout gradient is g·mask/(1−p)", "[dropout][autograd]") {
  Tensor x = leaf({5, 6}, -2, 2, 1);
  // The float64 gradient checks (a transposed input, p 1, eval) are samples
  // (tests/op_samples/elementwise.cpp); here the gradient is compared with the mask it used.
  Generator gen(13);
  Tensor y = dropout(x, 0.25, true, &gen);
  x.set_grad(Tensor());
  y.sum().backward();
  std::vector<double> yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) CHECK(gv[i] == Approx(yv[i] == 0.0 ? 0.0 : 1.0 / 0.75));
}

TEST_CASE("dropout errors", "[dropout][errors]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(dropout(x, 1.5, true), Catch::Contains("dropout") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(dropout(x, -0.1, false), Catch::Contains("dropout") && Catch::Contains("-0.1"));
  CHECK_THROWS_WITH(dropout(x, std::nan(""), true), Catch::Contains("dropout") && Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(dropout(arange(3), 0.5, true), Catch::Contains("dropout") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(dropout(Tensor(), 0.5, true), Catch::Contains("dropout") && Catch::Contains("undefined"));
}
