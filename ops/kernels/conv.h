// Kernel interface of the convolution family (internal). The front end (ops/conv.cpp) validates
// the arguments, makes the operands contiguous and allocates the outputs; conv1d arrives here as
// a conv2d with a unit H dim.
#pragma once
#include <array>
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};  // (H, W)
  int64_t groups = 1;
};

// y [N, O, OH, OW] = cross-correlation of x [N, C, H, W] with w [O, C/groups, kH, kW] (zero
// padding), plus bias[O] when defined. All operands contiguous, same dtype (float32/float64).
using Conv2dKernel = void(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y);
// Gradients of that convolution given gy = dL/dy (contiguous): gx [N, C, H, W], gw [O, C/groups,
// kH, kW], gb [O]. Each output is defined only when wanted and is overwritten (not accumulated).
// x is needed for gw only and w for gx only (the other may be undefined).
using Conv2dBackwardKernel = void(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p,
                                  const Tensor& gx, const Tensor& gw, const Tensor& gb);

}  // namespace tessera
