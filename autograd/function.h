// How an op records itself in the graph. The pattern, used by every op in ops/:
//
//   Tensor y = <compute>;
//   if (autograd::needs_grad({a, b}))
//     autograd::record("MulBackward", {a, b}, y,
//         [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& gy, const GradMask& needs) {
//           return std::vector<Tensor>{needs[0] ? gy * sb.unpack("mul") : Tensor(), ...};
//         });
//
// Gradients of broadcast operands are reduced back with sum_to(grad, input_shape).
#pragma once
#include <initializer_list>

#include "tessera/autograd/grad_mode.h"
#include "tessera/autograd/node.h"

namespace tessera::autograd {

// True when grad mode is on and any defined input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `output` the result of a new FunctionNode over `inputs`.
void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn fn);
// Makes `outputs` (distinct tensors, each made by the op) output 0, 1, ... of one new node over
// `inputs`: its backward receives all their gradients at once, after every consumer of every output
// has sent its part.
void record(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, MultiBackwardFn fn);

}  // namespace tessera::autograd

namespace tessera {
using autograd::GradMask;
using autograd::SavedTensor;
}  // namespace tessera
