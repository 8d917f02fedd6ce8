// Depthwise convolutions with one output channel per input channel (XCiT's LPI, CoaT's
// convolutional position encoding and CRPE) by our own kernels, on operands of any layout
// (cuda/kernels/conv_depthwise.cu): a token map [B, H·W, C] seen as [B, C, H, W] is read as it
// lies, channels innermost, instead of copied to NCHW for cuDNN. cuda/kernels/conv.cu sends them
// here (ops/kernels/conv.h).
#pragma once
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/conv.h"

namespace tessera::cuda {

// y = x ⋆ w (+ bias), or what `epilogue` makes of it (depthwise_conv2d_gelu's kernels,
// cuda/kernels/depthwise_conv2d_gelu.cu; `upstream` is g for DepthwiseEpilogue::GeluGradient): x, y
// and upstream any strides; w [C, 1, kH, kW] contiguous; bias [C] or undefined.
void depthwise_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y,
                      DepthwiseEpilogue epilogue = DepthwiseEpilogue::None, const Tensor& upstream = Tensor());
// Its gradients, each only where defined: gx (any strides) from gy (any strides) and w; gw
// [C, 1, kH, kW] and gb [C] from gy and x, as deterministic chunked sums.
void depthwise_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p,
                               const Tensor& gx, const Tensor& gw, const Tensor& gb);

}  // namespace tessera::cuda
