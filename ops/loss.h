#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// Mean cross-entropy of logits [N, C] against int64 class targets [N], with optional label
// smoothing (PyTorch's: target = (1-ε)·onehot + ε/C).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing = 0.0);
// Mean cross-entropy against soft (probability) targets [N, C] (timm's SoftTargetCrossEntropy,
// used with Mixup/CutMix).
Tensor soft_cross_entropy(const Tensor& logits, const Tensor& target_probs);

}  // namespace tessera
