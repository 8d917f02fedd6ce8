// Kernel interface of the loss family (internal): fused softmax cross-entropy. The front end
// (ops/loss.cpp) validates shapes and target values and passes contiguous tensors.
//
// For a row x of C logits with lse = log Σ_c exp(x_c) and target distribution q (Σ q = s):
//   loss = Σ_c q_c·(lse − x_c) = s·lse − Σ_c q_c·x_c,   ∂loss/∂x_c = s·softmax(x)_c − q_c.
// Hard targets t with label smoothing ε: q = (1−ε)·onehot(t) + ε/C (s = 1), never materialised.
// Soft targets: q is a given [N, C] tensor of probabilities.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// logits [N, C]; target int64 [N] (values already checked to lie in [0, C)) or floating [N, C]
// probabilities. Writes the per-row loss [N] and lse [N] (kept for the backward).
using CrossEntropyKernel = void(const Tensor& logits, const Tensor& target, double label_smoothing, const Tensor& loss,
                                const Tensor& lse);
// gx = grad_scale · ∂loss_i/∂x for every row, grad_scale a 0-d tensor of the logits' dtype (the
// upstream gradient of the mean divided by N).
using CrossEntropyBackwardKernel = void(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                        double label_smoothing, const Tensor& grad_scale, const Tensor& gx);

}  // namespace tessera
