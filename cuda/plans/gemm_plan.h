// GEMM plans: the translation of a row-major tensor product into cuBLASLt's column-major arguments,
// as a pure function (no CUDA in it) whose result is a plain, printable struct. On a GPU the plan
// is handed to cuBLASLt (cuda/libs/cublaslt_gpu.cpp); in the emulator a CPU reference of
// cuBLASLt's contract executes the very same plan (cuda/libs/cublaslt_reference.cpp), so every
// matmul run on the emulated device tests the translation, and tests/cuda/test_host_gemm_plan.cpp
// checks plans against argument sets worked out by hand.
//
// The translation: row-major C[m, n] = A[m, k]·B[k, n] is column-major Cᵀ = Bᵀ·Aᵀ, and a row-major
// matrix read column-major is its transpose. So cuBLAS's "A" is our b, its "B" our a, its M our n
// and its N our m; an operand stored transposed (a view such as k.transpose(-2, -1)) becomes a T
// flag instead of a copy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::cuda {

enum class BlasOp : uint8_t { N, T };

// What a call does besides the product, inside the GEMM (cuBLASLt's epilogues; the ones we use):
//   Bias    D[i, j] += bias[i] (length m: one value per row of the column-major D, i.e. per output
//           feature of our row-major result): CUBLASLT_EPILOGUE_BIAS;
//   BGradB  bias_grad[j] = Σ_k op(B)[k, j] (length n, D's dtype), B summed over the GEMM's k:
//           CUBLASLT_EPILOGUE_BGRADB. Our a is cuBLAS's B, so this is Σ_k a[j, k]: in a linear
//           layer's weight gradient gᵀ·x (a = gᵀ) the bias gradient, without a pass over g of its own.
// (GELU_AUX_BIAS and DGELU_BGRAD compute cuBLASLt's GELU, the tanh approximation, where our models
// use timm's erf GELU: docs/cuda.md, "Bias + GELU".)
enum class GemmEpilogue : uint8_t { None, Bias, BGradB };

// One cuBLASLt matmul (alpha = 1, beta = 0): for each of `batch` entries b,
//   D_b[m, n] = op(A_b)[m, k] · op(B_b)[k, n]  (and the epilogue),
// with X_b = X + offset_x + b·stride_x (elements), column-major with leading dimension ld_x.
struct GemmCall {
  BlasOp transa = BlasOp::N, transb = BlasOp::N;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t offset_a = 0, offset_b = 0, offset_c = 0;
  GemmEpilogue epilogue = GemmEpilogue::None;
  std::string str() const;
  bool operator==(const GemmCall&) const = default;
};

// All operands share `dtype`: float32, float64, or bfloat16/float16 (autocast) — which cuBLASLt
// multiplies on tensor cores, accumulating and scaling in float32. `tf32`: float32 operands may be
// rounded to TF32 inside the tensor cores (core/autocast.h's allow_tf32).
struct GemmPlan {
  DType dtype = DType::Float32;
  bool tf32 = false;
  std::vector<GemmCall> calls;
  std::string str() const;
};

// The plan of matmul_kernel's contract (ops/kernels/linalg.h): out[*batch, m, n] = a · b (+ bias
// per output column), a and b with out's batch dims and matrix_layout() defined, out contiguous.
// Reads only shapes and strides. cuBLAS's A is b's data, its B is a's, its C is out's. Batch dims
// that merge into one stride in all three operands become one strided-batch call; where several
// remain, the strided batch runs over the largest of them and the plan makes one call per index of
// the others (so a loop, where one is left, is over heads rather than samples). The op front ends
// copy an operand whose batch dims do not merge first (batch_ready, ops/kernels/linalg.h).
// `a_row_sums` (a and b matrices without batch dims, no bias): the one call also writes
// Σ_k a[i, k], as GemmEpilogue::BGradB.
GemmPlan plan_matmul(const Tensor& a, const Tensor& b, bool bias, const Tensor& out, bool a_row_sums = false);

}  // namespace tessera::cuda
