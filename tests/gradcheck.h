// Test helpers: the library's finite-difference gradient check (testing/gradcheck.h) as a Catch2 check
// (CHECK_GRADS), random float64 leaves, and value comparisons.
#pragma once
#include <catch2/catch.hpp>

#include <vector>

#include "tessera/testing/gradcheck.h"
#include "tessera/ops/ops.h"

namespace tessera::testing {

using Fn = GradcheckFn;
using tessera::gradcheck;
using tessera::GradcheckOptions;

// Element i (logical row-major order) of a float64 tensor, read/written through its strides.
inline double& element(const Tensor& t, int64_t i) { return float64_element(t, i); }

// Random float64 leaf tensor with values in [lo, hi), requiring grad.
inline Tensor leaf(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 1) {
  Generator gen(seed);
  Tensor t = rand(shape, DType::Float64, &gen) * (hi - lo) + lo;
  return t.set_requires_grad(true);
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
