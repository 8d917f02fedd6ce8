// Element conversions between dtypes (internal), shared by the CPU and CUDA copy kernels so a
// conversion gives the same bits on every device: every value goes through double (exact for all
// but int64 beyond 2^53, which rounds as in a C++ cast), half types through core/half.h.
#pragma once
#include <cstdint>
#include <type_traits>

#include "tessera/core/dtype.h"
#include "tessera/core/half.h"

namespace tessera::convert {

template <class T>
TS_HOST_DEVICE inline double to_double(T v) {
  return static_cast<double>(v);
}
template <>
TS_HOST_DEVICE inline double to_double(BFloat16 v) {
  return bf16_bits_to_float(v.bits);
}
template <>
TS_HOST_DEVICE inline double to_double(Float16 v) {
  return half_bits_to_float(v.bits);
}

template <class T>
TS_HOST_DEVICE inline T from_double(double v) {
  return static_cast<T>(v);
}
template <>
TS_HOST_DEVICE inline BFloat16 from_double(double v) {
  BFloat16 b;
  b.bits = float_to_bf16_bits(static_cast<float>(v));
  return b;
}
template <>
TS_HOST_DEVICE inline Float16 from_double(double v) {
  Float16 h;
  h.bits = float_to_half_bits(static_cast<float>(v));
  return h;
}
template <>
TS_HOST_DEVICE inline bool from_double(double v) {
  return v != 0.0;
}

template <class S, class D>
TS_HOST_DEVICE inline D convert(S v) {
  if constexpr (std::is_same_v<S, D>) return v;
  else return from_double<D>(to_double(v));
}

// Calls f(T{}) with T the C++ type of `dt` (every dtype).
template <class F>
void visit_dtype(DType dt, const F& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float16: return f(Float16{});
    case DType::Bool: return f(bool{});
  }
}

}  // namespace tessera::convert
