// Hooks on leaves: code that runs when backward has finished a leaf's gradient. This is what lets
// data-parallel training (train/distributed/reducer.h) send a bucket of gradients to the other
// processes while backward is still computing the rest, instead of after it.
#pragma once
#include <cstdint>
#include <functional>

#include "tessera/core/tensor.h"

namespace tessera::autograd {

// Called with the leaf after a backward pass has added its gradient into leaf.grad(): once per
// pass that reaches the leaf, after all of that pass's contributions are summed (the engine runs
// a leaf's AccumulateGrad once, when every consumer has reported). A leaf no gradient reaches in a
// pass is not called. Runs inside backward, with grad mode off.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

// Registers `hook` on a leaf that requires grad; returns a handle for removal. Hooks run in
// registration order.
int64_t add_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
// Removes the hook with this handle from the leaf (no-op when it is not there).
void remove_post_accumulate_grad_hook(const Tensor& leaf, int64_t handle);

}  // namespace tessera::autograd
