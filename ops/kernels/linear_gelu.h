// Kernel interface of linear_gelu (internal; ops/linear_gelu.h says what it computes). The front
// end (ops/linear_gelu.cpp) runs the GEMM and passes its contiguous output viewed as [rows, C].
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/elementwise.h"

namespace tessera {

// The unary op of GELU's erf form, or of its tanh form when `approximate`, for the kernels of every
// device (they apply it and its derivative with the element-wise formulas).
inline UnaryArgs gelu_args(bool approximate) { return {approximate ? UnaryOp::GeluTanh : UnaryOp::GeluErf}; }

// h = pre + bias, rounded to pre's dtype, and y = gelu(h) (the erf form, or tanh). pre (x·Wᵀ) is
// only read: the backward adds the bias again, to the same bits, rather than the forward writing h
// back over pre, a pass over the block's widest tensor.
using LinearGeluKernel = void(const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& y);
// gpre = g·gelu'(h) with h made as the forward made it, gbias[c] = Σ_rows gpre (when defined;
// double, launch-independent order).
using LinearGeluBackwardKernel = void(const Tensor& g, const Tensor& pre, const Tensor& bias, bool approximate,
                                      const Tensor& gpre, const Tensor& gbias);

}  // namespace tessera
