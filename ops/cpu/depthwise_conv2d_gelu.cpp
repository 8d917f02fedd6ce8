// CPU kernels of depthwise_conv2d_gelu (ops/kernels/depthwise_conv2d_gelu.h): the depthwise
// convolution's plane kernel (ops/cpu/conv_depthwise.cpp) with GELU, or GELU's gradient at the
// recomputed pre-activation, applied to each output plane while it is still in the work buffer.
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"

namespace tessera::cpu {

namespace {

// out = the epilogue of x ⋆ w + b, for both kernels.
void depthwise_with(DepthwiseEpilogue epilogue, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Conv2dParams& p, const Tensor& upstream, const Tensor& out) {
  const conv::Geometry g = conv::geometry(x.shape(), w.shape(), out.shape(), p);
  TS_DISPATCH_FLOAT(x.dtype(), "depthwise_conv2d_gelu", [&] {
    conv::depthwise_forward<scalar_t>(g, x.data<scalar_t>(), strides4(x), w.data<scalar_t>(),
                                      ptr_or_null<scalar_t>(bias), out.data<scalar_t>(), strides4(out), epilogue,
                                      ptr_or_null<scalar_t>(upstream), strides4(upstream));
  });
}

}  // namespace

void depthwise_conv2d_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                           const Tensor& y) {
  depthwise_with(DepthwiseEpilogue::Gelu, x, w, bias, p, Tensor(), y);
}

void depthwise_conv2d_gelu_backward(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                                    const Tensor& g, const Tensor& gh) {
  depthwise_with(DepthwiseEpilogue::GeluGradient, x, w, bias, p, g, gh);
}

}  // namespace tessera::cpu
