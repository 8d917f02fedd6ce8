// depthwise_conv2d_gelu, a fused op (ops/fused.h): a depthwise convolution, its bias and the GELU
// after it in one pass, as XCiT's LPI runs them (conv1, then GELU). Checks, dispatch and gradient:
// ops/depthwise_conv2d_gelu.cpp.
#pragma once
#include <array>

#include "tessera/core/tensor.h"

namespace tessera {

// gelu(conv2d(x, weight, bias, stride, padding, dilation, groups = C)) (GELU's erf form, as timm's
// nn.GELU) for x [N, C, H, W] and weight [C, 1, kH, kW]: one output channel per input channel,
// bias [C] or undefined. x is read as it lies (a token map seen as [N, C, H, W]); the result is
// contiguous, as the composition's (GELU's) is, so what follows it in LPI, BatchNorm, which takes
// NCHW, reads it without a copy. The pre-activation is never stored:
// the backward recomputes it from x, the tensor the filter gradient needs anyway. Under autocast
// with float32 activations it is the plain composition.
Tensor depthwise_conv2d_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                             std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
                             std::array<int64_t, 2> dilation = {1, 1});

}  // namespace tessera
