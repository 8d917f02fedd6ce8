#pragma once
#include <array>

#include "tessera/core/tensor.h"

namespace tessera {

// 2-D convolution, NCHW input [N, C, H, W], weight [O, C/groups, kH, kW], bias [O] or undefined.
// Depthwise convolution is groups == C.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
              std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1);
// 1-D convolution [N, C, L] with weight [O, C/groups, k], expressed through conv2d.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

}  // namespace tessera
