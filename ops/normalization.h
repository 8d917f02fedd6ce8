#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// Batch norm over dim 1 of [N, C, ...]. In training, normalises with the batch statistics and, if
// running_mean/var are defined, updates them in place: running = (1-momentum)·running +
// momentum·batch (the variance unbiased), as PyTorch. In eval, uses the running statistics.
// weight/bias [C] may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// Layer norm over the last dim, with optional affine weight/bias [C].
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// x / max(||x||₂ along dim, eps): PyTorch's F.normalize(x, p=2, dim, eps).
Tensor normalize(const Tensor& x, int64_t dim, double eps = 1e-12);

}  // namespace tessera
