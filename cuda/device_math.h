// Math for kernels, one name per function for float and double, mapped to the CUDA math library
// on the GPU and to the C library in the emulator (so float stays float: no silent promotion).
#pragma once
#include <cmath>

#include "tessera/cuda/launch.h"

namespace tessera::cuda::dm {

#define TS_DM_UNARY(name, f32, f64)                                   \
  __device__ __forceinline__ float name(float x) { return ::f32(x); } \
  __device__ __forceinline__ double name(double x) { return ::f64(x); }
TS_DM_UNARY(exp, expf, exp)
TS_DM_UNARY(log, logf, log)
TS_DM_UNARY(sqrt, sqrtf, sqrt)
TS_DM_UNARY(tanh, tanhf, tanh)
TS_DM_UNARY(erf, erff, erf)
TS_DM_UNARY(sin, sinf, sin)
TS_DM_UNARY(cos, cosf, cos)
TS_DM_UNARY(abs, fabsf, fabs)
TS_DM_UNARY(floor, floorf, floor)
#undef TS_DM_UNARY

__device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }
__device__ __forceinline__ float rsqrt(float x) { return 1.0f / ::sqrtf(x); }
__device__ __forceinline__ double rsqrt(double x) { return 1.0 / ::sqrt(x); }
template <class T>
__device__ __forceinline__ T max(T a, T b) {
  return a > b ? a : b;
}
template <class T>
__device__ __forceinline__ T min(T a, T b) {
  return a < b ? a : b;
}
// x − x is 0 for every finite x and NaN for ±inf and NaN.
template <class T>
__device__ __forceinline__ bool is_finite(T x) {
  return x - x == T(0);
}
template <class T>
__device__ __forceinline__ T infinity() {
  return static_cast<T>(HUGE_VAL);
}

}  // namespace tessera::cuda::dm
