// Bilinear/bicubic resizing of [N, C, H, W] maps (F.interpolate with align_corners=False):
// argument checks, dispatch, and the gradient, which is the adjoint resampling done by a
// dedicated backward kernel (the sampling formulas are in ops/kernels/interpolate.h).
#include "tessera/ops/interpolate.h"

#include "tessera/autograd/function.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor interpolate(const Tensor& x, std::array<int64_t, 2> size, InterpolationMode mode) {
  TraceScope trace;
  TS_CHECK(x.defined(), "interpolate: input is an undefined tensor");
  TS_CHECK(x.dim() == 4, "interpolate: expected a 4-d input [N, C, H, W], got ", describe(x));
  TS_CHECK(is_floating(x.dtype()), "interpolate: expected a floating input, got ", describe(x));
  TS_CHECK(size[0] > 0 && size[1] > 0, "interpolate: output size must be positive, got ", Shape{size[0], size[1]},
           " for input ", x.shape());
  TS_CHECK(x.shape()[2] > 0 && x.shape()[3] > 0, "interpolate: input spatial size must be non-empty, got ", x.shape());
  Tensor y = Tensor::empty({x.shape()[0], x.shape()[1], size[0], size[1]}, x.dtype(), x.device());
  interpolate_kernel[x.device()](mode, x.detach().contiguous(), y);
  if (autograd::needs_grad({x}))
    autograd::record(mode == InterpolationMode::Bilinear ? "UpsampleBilinear2dBackward" : "UpsampleBicubic2dBackward",
                     {x}, y, [mode, in_shape = x.shape()](const Tensor& gy, const GradMask&) {
                       Tensor gx = Tensor::empty(in_shape, gy.dtype(), gy.device());
                       interpolate_backward_kernel[gy.device()](mode, gy.contiguous(), gx);
                       return std::vector<Tensor>{gx};
                     });
  if (trace.outermost()) trace.record(OpId::interpolate, {x}, {y}, {{"mode", int64_t{static_cast<int>(mode)}}});
  return y;
}

}  // namespace tessera
