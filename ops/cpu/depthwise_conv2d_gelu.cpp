// CPU kernels of depthwise_conv2d_gelu (ops/kernels/depthwise_conv2d_gelu.h): the depthwise
// convolution's plane kernel (ops/cpu/conv_depthwise.cpp) with GELU, or GELU's gradient at the
// recomputed pre-activation, applied to each output plane while it is still in the work buffer.
// x, the weight, the upstream gradient and the output are stored alike (float32, float64 or
// bfloat16); the bias and the arithmetic are their compute type (float32 beside bfloat16).
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"

namespace tessera::cpu {

namespace {

// out = the epilogue of x ⋆ w + b, for both kernels.
void depthwise_with(DepthwiseEpilogue epilogue, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Conv2dParams& p, const Tensor& upstream, const Tensor& out) {
  const conv::Geometry g = conv::geometry(x.shape(), w.shape(), out.shape(), p);
  TS_DISPATCH_STORED(x.dtype(), "depthwise_conv2d_gelu", [&] {
    using S = storage_t;
    conv::depthwise_forward<S>(g, x.data<S>(), strides4(x), w.data<S>(), ptr_or_null<compute_t<S>>(bias), out.data<S>(),
                               strides4(out), epilogue, ptr_or_null<S>(upstream), strides4(upstream));
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
