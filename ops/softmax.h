#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// Numerically stable (max-subtracted) softmax and log-softmax over any dim.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace tessera
