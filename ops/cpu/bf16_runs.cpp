#include "tessera/ops/cpu/bf16_runs.h"

#include <immintrin.h>

#include "tessera/core/cpu_features.h"
#include "tessera/core/error.h"
#include "tessera/core/levers.h"

namespace tessera::cpu {

namespace {

#define TS_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define TS_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Whether this CPU has the instructions (read once; whether they are used is the lever's, each call).
const bool has_bf16_instructions = [] {
  const CpuFeatures& f = cpu_features();
  return f.avx512_bf16 && f.avx512bw && f.avx512vl && f.avx512dq;
}();
const bool has_avx512 = [] {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}();

void widen_run(const uint16_t* s, uint32_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(s[i]) << 16;  // vectorised by the compiler
}

// The zero-masked forms of the widening and the shift: GCC 12's unmasked ones pass an undefined
// vector that -Wmaybe-uninitialized flags (GCC bug 105593).
TS_AVX512_TARGET inline __m512i widen16(__m256i h) {
  return _mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16);
}

TS_AVX512_TARGET void widen_run_avx512(const uint16_t* s, uint32_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_si512(d + i, widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  if (i < n) {
    const __mmask16 lanes = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_epi32(d + i, lanes, widen16(_mm256_maskz_loadu_epi16(lanes, s + i)));
  }
}

// core/half.h's float_to_bf16_bits, branch-free so that it vectorises.
void narrow_run(const uint32_t* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = s[i];
    const uint16_t rounded = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    d[i] = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t{0x7fc0} : rounded;
  }
}

// Lanes where VCVTNEPS2BF16 and the formula differ: float32 subnormals (VFPCLASSPS category 0x20)
// and NaNs (0x01 quiet, 0x80 signalling).
TS_BF16_TARGET inline __mmask16 special_lanes(__m512 v) { return _mm512_fpclass_ps_mask(v, 0x20 | 0x01 | 0x80); }

TS_BF16_TARGET void narrow_run_native(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    if (_kortestz_mask16_u8(special_lanes(lo), special_lanes(hi)) == 0) {
      narrow_run(reinterpret_cast<const uint32_t*>(src + i), dst + i, 32);
      continue;
    }
    _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  for (; i < n; i += 16) {
    const int64_t m = n - i < 16 ? n - i : 16;
    const __mmask16 lanes = static_cast<__mmask16>((1u << m) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, src + i);
    if ((special_lanes(v) & lanes) != 0) {
      narrow_run(reinterpret_cast<const uint32_t*>(src + i), dst + i, m);
      continue;
    }
    _mm256_mask_storeu_epi16(dst + i, lanes, (__m256i)_mm512_cvtneps_pbh(v));
  }
}

}  // namespace

void bf16_to_float(const BFloat16* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  uint32_t* d = reinterpret_cast<uint32_t*>(dst);
  if (has_avx512)
    for (int64_t r = 0; r < rows; ++r) widen_run_avx512(s + r * src_ld, d + r * dst_ld, cols);
  else
    for (int64_t r = 0; r < rows; ++r) widen_run(s + r * src_ld, d + r * dst_ld, cols);
}

void float_to_bf16(const float* src, int64_t src_ld, BFloat16* dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  if (has_bf16_instructions && levers().cpu_bf16_native)
    for (int64_t r = 0; r < rows; ++r) narrow_run_native(src + r * src_ld, d + r * dst_ld, cols);
  else
    for (int64_t r = 0; r < rows; ++r)
      narrow_run(reinterpret_cast<const uint32_t*>(src + r * src_ld), d + r * dst_ld, cols);
}

void float_to_bf16_portable(const float* src, BFloat16* dst, int64_t n) {
  narrow_run(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint16_t*>(dst), n);
}

void float_to_bf16_native(const float* src, BFloat16* dst, int64_t n) {
  TS_CHECK(has_bf16_instructions, "float_to_bf16_native: this CPU has no AVX-512 BF16 instructions");
  narrow_run_native(src, reinterpret_cast<uint16_t*>(dst), n);
}

void round_floats_to_bf16(float* values, int64_t n) {
  uint32_t* v = reinterpret_cast<uint32_t*>(values);
  for (int64_t i = 0; i < n; ++i) {  // narrow_run's formula, kept as the top 16 bits
    const uint32_t u = v[i];
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    v[i] = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : rounded;
  }
}

}  // namespace tessera::cpu
