// linear_gelu, a fused op (ops/fused.h): a linear layer's bias and the GELU after it in one pass
// over the GEMM's output. Checks, dispatch and gradient: ops/linear_gelu.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// gelu(x·Wᵀ + b) (the erf form, or tanh when `approximate`): the first half of every transformer
// MLP. The GEMM runs without its bias; one element-wise pass adds the bias and applies GELU, and
// the backward derives through GELU and sums the bias gradient in one pass. Under autocast it is
// the plain composition.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, bool approximate = false);

}  // namespace tessera
