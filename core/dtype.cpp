#include "core/dtype.h"

#include <cmath>

namespace tessera {

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::Bool: return 1;
  }
  return 0;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

BFloat16::BFloat16(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) {
    bits = 0x7fc0;
    return;
  }
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);  // round to nearest, ties to even
  bits = static_cast<uint16_t>((u + rounding) >> 16);
}
BFloat16::operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

Float16::Float16(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
    return;
  }
  if (abs >= 0x477ff000) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00);
    return;
  }
  if (abs < 0x38800000) {  // subnormal half (or zero): scale into the integer range and round
    float mag = bits_float(abs) * 16777216.0f;  // 2^24: one half-subnormal ulp becomes 1.0
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(mag)));
    return;
  }
  uint32_t mant_odd = (abs >> 13) & 1;
  abs += 0xc8000fff + mant_odd;  // rebias exponent (127 -> 15) and round to nearest even
  bits = static_cast<uint16_t>(sign | (abs >> 13));
}

Float16::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  if (exp == 0) {  // zero or subnormal
    float mag = static_cast<float>(mant) / 16777216.0f;
    return sign ? -mag : mag;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000 | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace tessera
