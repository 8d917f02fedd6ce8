// Kernel interface of linear_gelu (internal; ops/linear_gelu.h says what it computes). The front
// end (ops/linear_gelu.cpp) passes the GEMM's operands; the kernels run the GEMM too.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/elementwise.h"

namespace tessera {

// The unary op of GELU's erf form, or of its tanh form when `approximate`, for the kernels of every
// device (they apply it and its derivative with the element-wise formulas).
inline UnaryArgs gelu_args(bool approximate) { return {approximate ? UnaryOp::GeluTanh : UnaryOp::GeluErf}; }

// y = gelu(h) (the erf form, or tanh) for h = x·wᵀ + bias: x [rows, in] and wt = wᵀ [in, out] as
// the front end makes GEMM operands (ops/kernels/linalg.h gemm_operand), y [rows, out] contiguous.
// When pre is defined (training) the GEMM's product x·wᵀ is written there, the bias added to it
// rounded to its dtype, and the backward adds the bias again to the same bits rather than the
// forward writing h back over pre, a pass over the block's widest tensor. Undefined (inference),
// the product lives only in y's rows until they become y.
using LinearGeluKernel = void(const Tensor& x, const Tensor& wt, const Tensor& bias, bool approximate,
                              const Tensor& pre, const Tensor& y);
// gpre = g·gelu'(h) with h made as the forward made it, gbias[c] = Σ_rows gpre (when defined;
// double, launch-independent order).
using LinearGeluBackwardKernel = void(const Tensor& g, const Tensor& pre, const Tensor& bias, bool approximate,
                                      const Tensor& gpre, const Tensor& gbias);

}  // namespace tessera
