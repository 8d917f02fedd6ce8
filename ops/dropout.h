#pragma once
#include "tessera/core/tensor.h"
#include "tessera/ops/creation.h"

namespace tessera {

// Zeroes each element with probability p and scales the rest by 1/(1-p) when training; identity
// otherwise or when p == 0.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace tessera
