// Kernel interface of the convolution family (internal). The front end (ops/conv.cpp) validates
// the arguments, lays the activations out (below) and allocates the outputs; conv1d arrives here
// as a conv2d with a unit H dim.
#pragma once
#include <array>
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};  // (H, W)
  int64_t groups = 1;
};

// A depthwise convolution with one output channel per input channel: XCiT's LPI and CoaT's position
// encodings, whose inputs are token maps [B, H·W, C] seen as [B, C, H, W], channels innermost.
inline bool depthwise_one_to_one(const Shape& x, const Shape& w, const Conv2dParams& p) {
  return p.groups == x[1] && w[0] == x[1] && w[1] == 1;
}

// Whether t [N, C, H, W] lies dense with its channels innermost (N, H, W, C in memory: a token map
// seen as [B, C, H, W]); dims of size 1 take any stride.
inline bool is_channels_last(const Tensor& t) {
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}
// The strides of a dense channels-last tensor of that shape.
inline Shape channels_last_strides(const Shape& s) { return {s[2] * s[3] * s[1], 1, s[3] * s[1], s[1]}; }

// What the depthwise kernels of each device write at an output element, given h = x ⋆ w + b: h
// itself (conv2d), gelu(h) (depthwise_conv2d_gelu, GELU's erf form) or g·gelu'(h) for the upstream
// gradient g at the same element (its backward, which recomputes h rather than keep it).
enum class DepthwiseEpilogue : uint8_t { None, Gelu, GeluGradient };

// y [N, O, OH, OW] = cross-correlation of x [N, C, H, W] with w [O, C/groups, kH, kW] (zero
// padding), plus bias[O] when defined. Same dtype (float32/float64); the weight and bias
// contiguous. The activations (x and y; gy and gx below) are as the front end lays them out
// (ops/conv.cpp conv_layout), by the levers of core/levers.h:
//   a depthwise one-to-one convolution while TESSERA_DEPTHWISE_ANY_LAYOUT is on: any strides, x and
//     gy as they lie (a token map without a copy), y and gx in x's dim order; on a CUDA device our
//     own kernels run it instead of cuDNN;
//   a depthwise one-to-one convolution of an x whose dims lie in N, H, W, C order while
//     TESSERA_DEPTHWISE_CUDNN_NHWC is on (it takes precedence): all dense channels-last, copied
//     only where they are not, and on a CUDA device cuDNN's NHWC kernels run it (PyTorch sends
//     channels-last depthwise convolutions there);
//   every other convolution: contiguous.
// A depthwise one-to-one convolution's kernels take any strides whatever the levers (a lever
// flipped between a forward and its backward; the backward of depthwise_conv2d_gelu, which hands
// its GELU gradient in x's dim order): a CUDA device then runs cuDNN only where the operands share
// a layout it takes.
using Conv2dKernel = void(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y);
// Gradients of that convolution given gy = dL/dy: gx [N, C, H, W], gw [O, C/groups, kH, kW], gb [O].
// Each output is defined only when wanted and is overwritten (not accumulated). x is needed for gw
// only and w for gx only (the other may be undefined).
using Conv2dBackwardKernel = void(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p,
                                  const Tensor& gx, const Tensor& gw, const Tensor& gb);

}  // namespace tessera
