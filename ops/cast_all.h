// Many tensors converted to one dtype by one op: under autocast a model's float32 weights are
// rounded to bfloat16/float16 for its GEMMs and convolutions, and casting them one by one costs a
// launch per weight in the forward pass and another in the backward pass (374 of a CoaT-Lite step's
// ~2,100). cast_all makes them in one launch per source dtype, and its gradient (each output's
// gradient converted back to its input's dtype) is one launch too: an op with several outputs whose
// backward receives all their gradients at once (autograd/node.h).
#pragma once
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// out[i] = tensors[i].to(dtype), as Tensor::to does it: a tensor already in `dtype` comes back as it
// is, any other as a new contiguous tensor; differentiable when `dtype` is floating. The tensors
// must be defined and on one device; their shapes, layouts and dtypes may differ.
std::vector<Tensor> cast_all(const std::vector<Tensor>& tensors, DType dtype);

}  // namespace tessera
