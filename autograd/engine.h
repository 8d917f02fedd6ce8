// The backward pass: an iterative traversal (no recursion, so graph depth is unlimited) that counts
// each node's consumers, then runs nodes whose gradients are complete, accumulating the gradient
// contributions of tensors used more than once.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera::autograd {

// Back-propagates `grad_output` (same shape as `root`) from `root`. Frees the graph as it goes
// unless `retain_graph`.
void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph);

class Node;
// Whether this thread is inside backward(), and the node whose backward runs right now (nullptr
// between nodes, while the engine sums gradients): profilers attribute kernels to them
// (autograd/profiler.h).
bool in_backward();
const Node* current_backward_node();

}  // namespace tessera::autograd
