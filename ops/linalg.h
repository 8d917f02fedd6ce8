#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// torch.matmul semantics: 1-D·1-D dot, 2-D·2-D GEMM, batched with broadcasting of the batch dims;
// a 1-D operand is promoted to a matrix and the added dim removed from the result.
Tensor matmul(const Tensor& a, const Tensor& b);
// y = x·Wᵀ + b with weight [out, in] (PyTorch's layout); bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tessera
