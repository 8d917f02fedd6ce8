// bfloat16 <-> float32 conversion of contiguous runs on the CPU (internal): how every CPU kernel
// reads and writes bfloat16 storage (ops/cpu/storage.h) and how the copy kernel converts.
//
// float32 -> bfloat16 rounds to nearest, ties to even, exactly as core/half.h (and so as the cuda
// kernels) does for every input: with AVX-512 BF16 (cpu_bf16_native(), core/cpu_features.h) by
// VCVTNE2PS2BF16, 32 values an instruction, and by the integer formula elsewhere. The instruction
// itself differs from the formula on two kinds of input — it flushes float32 subnormals to zero and
// keeps a NaN's sign and payload — so a vector that holds either (never in a trained network's
// activations, but possible; VFPCLASSPS finds them) is converted by the formula instead: both paths
// give the same bits for every input (tests/test_cpu_bf16_native.cpp). bfloat16 -> float32 is exact
// (a shift).
//
// The kernels convert short runs (a head's 32 channels of a token, a norm's row of 128), so each
// call takes a whole matrix of them: `rows` runs of `cols` values, row strides in elements.
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

void bf16_to_float(const BFloat16* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows, int64_t cols);
void float_to_bf16(const float* src, int64_t src_ld, BFloat16* dst, int64_t dst_ld, int64_t rows, int64_t cols);

// One run.
inline void bf16_to_float(const BFloat16* src, float* dst, int64_t n) { bf16_to_float(src, n, dst, n, 1, n); }
inline void float_to_bf16(const float* src, BFloat16* dst, int64_t n) { float_to_bf16(src, n, dst, n, 1, n); }

// values[i] = float(bfloat16(values[i])) in place: the float32 value a bfloat16 store and load
// would give, bit for bit.
void round_floats_to_bf16(float* values, int64_t n);

// The two paths of float_to_bf16 on one run, for the tests that hold them equal (the native one
// only where cpu_features() has AVX-512 BF16; it throws elsewhere).
void float_to_bf16_portable(const float* src, BFloat16* dst, int64_t n);
void float_to_bf16_native(const float* src, BFloat16* dst, int64_t n);

}  // namespace tessera::cpu
