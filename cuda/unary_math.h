// The unary activation formulas (ops/kernels/unary_formulas.h) for CUDA kernels, one element at a
// time: the elementwise kernels and the fused bias + GELU share them.
#pragma once
#include "tessera/cuda/device_math.h"
#include "tessera/ops/kernels/unary_formulas.h"

namespace tessera::cuda {

// The formulas' functions spelled for one element (device_math.h: float stays float).
struct ScalarMath {
#define TS_SCALAR_MATH(name)      \
  template <class T>              \
  static __device__ T name(T x) { \
    return dm::name(x);           \
  }
  TS_SCALAR_MATH(exp)
  TS_SCALAR_MATH(log)
  TS_SCALAR_MATH(sqrt)
  TS_SCALAR_MATH(rsqrt)
  TS_SCALAR_MATH(abs)
  TS_SCALAR_MATH(tanh)
  TS_SCALAR_MATH(erf)
  TS_SCALAR_MATH(sin)
  TS_SCALAR_MATH(cos)
#undef TS_SCALAR_MATH
  template <class T>
  static __device__ T sign(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  }
  template <class T>
  static __device__ T pow(T x, T p) {
    return dm::pow(x, p);
  }
  template <class T>
  static __device__ T min(T x, T c) {
    return dm::min(x, c);
  }
  template <class T>
  static __device__ T max(T x, T c) {
    return dm::max(x, c);
  }
  template <class T>
  static __device__ T select(bool cond, T a, T b) {
    return cond ? a : b;
  }
};

// f(x).
template <class T>
__device__ T unary_value(const UnaryArgs& a, T x) {
  T y = x;
  unary_formula<ScalarMath, T>(a, x, [&](T value) { y = value; });
  return y;
}

// gy · f'(x), from x and/or y = f(x).
template <class T>
__device__ T unary_derivative(const UnaryArgs& a, T x, T y, T g) {
  T gx = g;
  unary_derivative_formula<ScalarMath, T>(a, x, y, g, [&](T value) { gx = value; });
  return gx;
}

}  // namespace tessera::cuda
