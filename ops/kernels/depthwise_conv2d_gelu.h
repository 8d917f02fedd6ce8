// Kernel interface of depthwise_conv2d_gelu (internal; ops/depthwise_conv2d_gelu.h says what it
// computes). The front end (ops/depthwise_conv2d_gelu.cpp) hands x as it lies, makes y contiguous
// and lays gh out in x's dim order; the convolution's own gradients are then
// conv2d_backward_kernel's, from gh.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/conv.h"

namespace tessera {

// y = gelu(x ⋆ w + b) (the erf form) for a depthwise convolution with one output channel per input
// channel: x and y [N, C, *] any strides, w [C, 1, kH, kW] contiguous, bias [C] (the accumulation
// dtype, core/dtype.h) or undefined. The pre-activation is never stored.
using DepthwiseConv2dGeluKernel = void(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                                       const Tensor& y);
// gh = g · gelu'(h) with h = x ⋆ w + b recomputed: g and gh any strides, y's shape.
using DepthwiseConv2dGeluBackwardKernel = void(const Tensor& x, const Tensor& w, const Tensor& bias,
                                               const Conv2dParams& p, const Tensor& g, const Tensor& gh);

}  // namespace tessera
