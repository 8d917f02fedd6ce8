#pragma once
#include <array>

#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/interpolate.h"  // InterpolationMode

namespace tessera {

// Resizes [N, C, H, W] to `size` as F.interpolate(..., mode, align_corners=false): bilinear, or
// bicubic with PyTorch's cubic convolution kernel (a = -0.75) and clamped border taps.
Tensor interpolate(const Tensor& x, std::array<int64_t, 2> size, InterpolationMode mode);

}  // namespace tessera
