// Kernel interface of the convolution family (internal). The front end (ops/conv.cpp) validates
// the arguments, makes the operands contiguous (except as conv_any_layout says) and allocates the
// outputs; conv1d arrives here as a conv2d with a unit H dim.
#pragma once
#include <array>
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/levers.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};  // (H, W)
  int64_t groups = 1;
};

// Whether a convolution takes its activations as they lie: a depthwise convolution with one output
// channel per input channel (XCiT's LPI, CoaT's position encodings) gets x and gy in any strides
// (a channels-last view of a token grid, without a copy to NCHW) and y and gx laid out in x's dim
// order, while TESSERA_DEPTHWISE_ANY_LAYOUT is on (core/levers.h); on a CUDA device our own
// kernels then run it instead of cuDNN. Every other convolution gets contiguous operands.
inline bool depthwise_one_to_one(const Shape& x, const Shape& w, const Conv2dParams& p) {
  return p.groups == x[1] && w[0] == x[1] && w[1] == 1;
}
inline bool conv_any_layout(const Shape& x, const Shape& w, const Conv2dParams& p) {
  return levers().depthwise_any_layout && depthwise_one_to_one(x, w, p);
}

// y [N, O, OH, OW] = cross-correlation of x [N, C, H, W] with w [O, C/groups, kH, kW] (zero
// padding), plus bias[O] when defined. Same dtype (float32/float64); the weight and bias
// contiguous, x and y too unless conv_any_layout.
using Conv2dKernel = void(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y);
// Gradients of that convolution given gy = dL/dy (contiguous unless conv_any_layout, as x and
// gx): gx [N, C, H, W], gw [O, C/groups, kH, kW], gb [O]. Each output is defined only when wanted and is overwritten (not accumulated).
// x is needed for gw only and w for gx only (the other may be undefined).
using Conv2dBackwardKernel = void(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p,
                                  const Tensor& gx, const Tensor& gw, const Tensor& gb);

}  // namespace tessera
