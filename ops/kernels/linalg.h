// Kernel interface of the matmul/linear family (internal).
//
// One kernel does every product: out[*batch, m, n] = a[*batch, m, k] · b[*batch, k, n] (+ bias).
// The front end (ops/linalg.cpp) expands a and b to out's batch dims (broadcast batch dims have
// stride 0, so shared operands are never copied) and guarantees that the last two dims of each
// are a row-major or a column-major matrix (matrix_layout() below), so a transposed view such as
// k.transpose(-2, -1) reaches the kernel as a transpose flag instead of a copy.
#pragma once
#include <algorithm>
#include <optional>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// How the last two dims [rows, cols] of a tensor lie in memory, in BLAS terms: row-major with
// row stride `ld`, or column-major (`transposed`: the transpose of a row-major [cols, rows]
// matrix) with column stride `ld`.
struct MatrixLayout {
  bool transposed = false;
  int64_t ld = 1;
};

// The layout of t's last two dims, or nullopt when neither dim has unit stride (or the strides
// overlap rows), in which case the caller must make the operand contiguous first. Strides of
// size-1 dims are ignored.
inline std::optional<MatrixLayout> matrix_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), rs = t.stride(-2), cs = t.stride(-1);
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1)))
    return MatrixLayout{false, rows <= 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1)))
    return MatrixLayout{true, cols <= 1 ? std::max<int64_t>(rows, 1) : cs};
  return std::nullopt;
}

// A matrix operand as the kernel takes it: itself when its last two dims have a BLAS layout
// (row- or column-major), else a contiguous copy.
inline Tensor gemm_operand(const Tensor& t) { return matrix_layout(t) ? t : t.contiguous(); }

// A batched operand whose batch dims do not merge into one stride (q, k or v viewed out of a qkv
// projection: sample stride N·3C, head stride d_h) makes a device GEMM one library call per index
// of all but one batch dim. Whether x [*batch, rows, cols] is such an operand: its batch dims do not
// merge, and none is broadcast (stride 0 over a size above 1: a copy would multiply its bytes).
bool needs_batch_copy(const Tensor& x);
// Strides to give Tensor::empty_in_order for a dense copy of x whose batch dims merge: they are
// outermost and in order, and the matrix keeps x's orientation (row- or column-major), so the copy
// reads and writes along the same contiguous dim.
Shape batch_copy_order(const Tensor& x);
// x, or on a device that is not the CPU (whose GEMMs take one strided batch per call; the CPU's
// loops over the batch itself) with TESSERA_GEMM_BATCH_COPY on, x's copy into that layout when it
// needs one. Not differentiable (the op front ends call it on detached operands, and save the copy
// for their backward so that it is made once).
Tensor batch_ready(const Tensor& x);

// out = a · b, plus bias[n] added to every row when bias is defined. a is [*batch, m, k] and b
// [*batch, k, n] with out's batch dims (any batch strides, including 0) and matrix_layout()
// defined; bias is contiguous; out is contiguous [*batch, m, n]. Same dtype (float32/float64).
// a_row_sums, when defined (a and b matrices, no bias; [m], contiguous, out's dtype), receives
// Σ_k a[i, k]: a linear layer's bias gradient, whose weight gradient is gᵀ·x (a = gᵀ). On CUDA the
// GEMM's epilogue sums them (cuBLASLt's BGRADB, TESSERA_BIAS_GRAD_EPILOGUE) without a pass over g
// of its own; elsewhere sum_rows_by_reduction does.
using MatmulKernel = void(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out,
                          const Tensor& a_row_sums);

// a_row_sums[i] = Σ_k a[i, k] by the reduction kernel over aᵀ's leading dim: for a = gᵀ the very
// call, and so the bits, of sum(g, 0).
void sum_rows_by_reduction(const Tensor& a, const Tensor& a_row_sums);

}  // namespace tessera
