// Bit-exact float32 <-> bfloat16 / float16 conversions, usable on the host and in CUDA kernels, so
// that a conversion on the GPU rounds exactly as the same conversion on the CPU (round to nearest,
// ties to even; NaN stays NaN, overflow becomes inf, half subnormals are exact). Integer arithmetic
// only: no libm, no FPU rounding mode.
#pragma once
#include <cstdint>
#include <cstring>

#include "tessera/core/host_device.h"

namespace tessera {

TS_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TS_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16 is the top half of a float32.
TS_HOST_DEVICE inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN (a quiet one)
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

TS_HOST_DEVICE inline float bf16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// TF32, as tensor cores read float32 operands when TF32 is allowed: sign, 8 exponent bits and 10
// mantissa bits, rounded to nearest even and kept in a float (the emulator's cuBLASLt and cuDNN).
TS_HOST_DEVICE inline float round_to_tf32(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return f;  // inf, NaN
  u += 0xfffu + ((u >> 13) & 1u);
  return bits_float(u & 0xffffe000u);
}

// IEEE binary16.
TS_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // A half subnormal (or zero): the result is round_half_even(|f|·2^24). With |f| = m·2^(e−150)
    // (m the 24-bit significand) that is m shifted right by 126 − e (>= 14) bits.
    const uint32_t e = abs >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25 (float subnormals too): 0
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u, s = 126u - e;
    uint32_t q = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias the exponent (127 -> 15) and round to nearest even
  return static_cast<uint16_t>(sign | (abs >> 13));
}

TS_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant·2^-24, exact in float32
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -mag : mag;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace tessera
