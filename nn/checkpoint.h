// Activation checkpointing (Chen et al., 2016, "Training Deep Nets with Sublinear Memory Cost";
// PyTorch's torch.utils.checkpoint, timm's --grad-checkpointing): y = fn(x) is computed without
// recording a graph, so none of fn's intermediate tensors is kept for the backward pass; only x is.
// When the gradient reaches y, fn(x) runs again with the graph recorded and the gradient flows
// through that. A transformer block checkpointed this way keeps one [B, N, d] tensor instead of
// the two dozen its graph saves, for about one more forward pass of compute.
//
// The recomputation sees what the forward saw: the default generator is rewound to where it was,
// so dropout and stochastic depth draw the same masks; autocast is as it was; BatchNorm normalises
// with the batch's statistics again but does not update its running statistics a second time
// (recomputing() below). Parameters inside fn receive their gradients during the recomputation's
// own backward pass (gradient hooks fire there), and x's gradient is returned to the outer pass.
#pragma once
#include <functional>

#include "tessera/core/tensor.h"

namespace tessera::nn {

// fn(x), checkpointed when grad mode is on and x requires grad (then y requires grad); otherwise
// simply fn(x) (inference, or an input nothing upstream needs a gradient for: as in PyTorch's
// reentrant checkpoint, fn's parameters would get no gradient through an input that has none).
// fn must compute the same function when called again (no state of its own that it changes), and
// is kept until the backward pass: it captures modules and sizes, never a tensor with history.
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x);

// True while a checkpoint's backward recomputes its forward on this thread.
bool recomputing();

}  // namespace tessera::nn
