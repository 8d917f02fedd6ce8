// Finite-difference gradient checking (float64) and small helpers shared by the tests.
//
// gradcheck(f, inputs) compares, for every input that requires grad, the analytic vector-Jacobian
// product from backward() against central differences (f(x+εe_i) − f(x−εe_i)) / 2ε, contracted
// with a fixed random upstream gradient, element by element. Inputs may be any views
// (non-contiguous, expanded): the perturbation is written through the view into its storage.
#pragma once
#include <catch2/catch.hpp>

#include <functional>
#include <sstream>
#include <vector>

#include "ops/ops.h"

namespace tessera::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-4;
};

// Element i (logical row-major order) of a float64 tensor, read/written through its strides.
inline double& element(const Tensor& t, int64_t i) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (i % t.shape()[d]) * t.strides()[d];
    i /= t.shape()[d];
  }
  return t.data<double>()[off];
}

// Random float64 leaf tensor with values in [lo, hi), requiring grad.
inline Tensor leaf(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 1) {
  Generator gen(seed);
  Tensor t = rand(shape, DType::Float64, &gen) * (hi - lo) + lo;
  return t.set_requires_grad(true);
}

// Returns a description of the first mismatch, or "" when every gradient matches.
inline std::string gradcheck(const Fn& f, const std::vector<Tensor>& inputs, GradcheckOptions opt = {}) {
  Tensor out = f(inputs);
  Generator gen(1234);
  Tensor upstream = randn(out.shape(), DType::Float64, &gen);
  for (const Tensor& t : inputs)
    if (t.requires_grad() && t.is_leaf()) t.set_grad(Tensor());
  out.backward(upstream);

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    // The gradient lives on the leaf the input is a view of; the input itself may be a view.
    Tensor analytic = x.grad();
    if (!analytic.defined()) return "input " + std::to_string(k) + " received no gradient";
    if (analytic.shape() != x.shape()) return "input " + std::to_string(k) + " gradient has the wrong shape";
    for (int64_t i = 0; i < x.numel(); ++i) {
      double& v = element(x, i);
      const double saved = v;
      double plus, minus;
      {
        NoGradGuard no_grad;
        v = saved + opt.eps;
        plus = (f(inputs) * upstream).sum().item();
        v = saved - opt.eps;
        minus = (f(inputs) * upstream).sum().item();
        v = saved;
      }
      double numeric = (plus - minus) / (2 * opt.eps);
      double got = element(analytic.contiguous(), i);
      if (std::abs(got - numeric) > opt.atol + opt.rtol * std::abs(numeric)) {
        std::ostringstream os;
        os << "input " << k << " element " << i << ": analytic " << got << " vs numeric " << numeric;
        return os.str();
      }
    }
  }
  return "";
}

// Max |a - b| over two value lists of the same length.
inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Max |a - b| over all elements (shapes must match).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return max_abs_diff(a.to_vector<double>(), b.to_vector<double>());
}

}  // namespace tessera::testing

#define CHECK_GRADS(f, inputs, ...)                                                  \
  do {                                                                               \
    std::string mismatch_ = ::tessera::testing::gradcheck(f, inputs, ##__VA_ARGS__); \
    INFO(mismatch_);                                                                 \
    CHECK(mismatch_.empty());                                                        \
  } while (0)
