// How an op meets operands of two precisions under autocast with low-precision activations
// (core/autocast.h): a float32 operand (a parameter: a position table, a class token) meeting an
// operand in the autocast dtype (an activation) is rounded to that dtype by a recorded cast, so
// the op runs in the low precision and the parameter's gradient comes back in float32. Outside
// autocast, or for any other pair of dtypes, the operands come back unchanged and the op's own
// check refuses a mismatch.
#pragma once
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

std::pair<Tensor, Tensor> autocast_meet(const Tensor& a, const Tensor& b);
std::vector<Tensor> autocast_meet(const std::vector<Tensor>& tensors);

// A tensor in the accumulation dtype (core/dtype.h): half types in float32, by a recorded cast;
// others unchanged. For ops that compute in float32 whatever their input (losses, as under
// torch.autocast).
Tensor in_accumulate_dtype(const Tensor& t);

}  // namespace tessera
