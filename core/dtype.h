// Element types. float32 is the default, float64 exists for gradient checks, int64 for labels and
// indices; bfloat16/float16 are storage types (conversion only on the CPU) for the GPU's mixed
// precision.
#pragma once
#include <cstdint>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera {

enum class DType : uint8_t { Float32, Float64, Int64, BFloat16, Float16, Bool };

const char* dtype_name(DType dt);
size_t dtype_size(DType dt);
inline bool is_floating(DType dt) { return dt != DType::Int64 && dt != DType::Bool; }
inline bool is_half(DType dt) { return dt == DType::BFloat16 || dt == DType::Float16; }
// The dtype that arithmetic on `dt` values accumulates in, and that the per-channel parameters and
// statistics beside a `dt` activation are held in (a LayerNorm's weight, its row means): float32 for
// the half types, whose 8 or 11 significant bits would lose a sum's small terms; the dtype itself
// otherwise.
inline DType accumulate_dtype(DType dt) { return is_half(dt) ? DType::Float32 : dt; }

// bfloat16: the top 16 bits of an IEEE float32; conversion rounds to nearest even (core/half.h).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);
  explicit operator float() const;
};

// IEEE 754 binary16; conversion rounds to nearest even, handles subnormals, inf and NaN.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f);
  explicit operator float() const;
};

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::Float16;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::Bool;
};

}  // namespace tessera

// Runs the lambda-like __VA_ARGS__ with `scalar_t` bound to the C++ type of a float32/float64
// dtype; any other dtype is an error naming the op. Compute kernels are written once as templates
// and instantiated through this macro (PyTorch's AT_DISPATCH pattern).
#define TS_DISPATCH_FLOAT(DT, OP, ...)                                                                        \
  [&] {                                                                                                       \
    switch (DT) {                                                                                             \
      case ::tessera::DType::Float32: {                                                                       \
        using scalar_t = float;                                                                               \
        return __VA_ARGS__();                                                                                 \
      }                                                                                                       \
      case ::tessera::DType::Float64: {                                                                       \
        using scalar_t = double;                                                                              \
        return __VA_ARGS__();                                                                                 \
      }                                                                                                       \
      default:                                                                                                \
        throw ::tessera::Error(::tessera::detail::concat(OP, ": dtype ", ::tessera::dtype_name(DT),           \
                                                         " is not supported (expected float32 or float64)")); \
    }                                                                                                         \
  }()

// As TS_DISPATCH_FLOAT, plus int64 (for ops that also make sense on indices/labels).
#define TS_DISPATCH_ALL(DT, OP, ...)                                                                    \
  [&] {                                                                                                 \
    switch (DT) {                                                                                       \
      case ::tessera::DType::Float32: {                                                                 \
        using scalar_t = float;                                                                         \
        return __VA_ARGS__();                                                                           \
      }                                                                                                 \
      case ::tessera::DType::Float64: {                                                                 \
        using scalar_t = double;                                                                        \
        return __VA_ARGS__();                                                                           \
      }                                                                                                 \
      case ::tessera::DType::Int64: {                                                                   \
        using scalar_t = int64_t;                                                                       \
        return __VA_ARGS__();                                                                           \
      }                                                                                                 \
      case ::tessera::DType::Bool: {                                                                    \
        using scalar_t = bool;                                                                          \
        return __VA_ARGS__();                                                                           \
      }                                                                                                 \
      default:                                                                                          \
        throw ::tessera::Error(                                                                         \
            ::tessera::detail::concat(OP, ": dtype ", ::tessera::dtype_name(DT), " is not supported")); \
    }                                                                                                   \
  }()
