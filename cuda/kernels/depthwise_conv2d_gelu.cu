// CUDA kernels of depthwise_conv2d_gelu (ops/kernels/depthwise_conv2d_gelu.h): the depthwise
// forward kernel (cuda/kernels/conv_depthwise.cu), a thread per output element in the output's
// memory order, finishing with GELU, or with g·gelu'(h) at the recomputed pre-activation h. Beside
// bfloat16/float16 activations h and GELU are computed in float32 and only the result is rounded.
#include "tessera/cuda/depthwise_conv.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/depthwise_conv2d_gelu.h"

namespace tessera::cuda {

void depthwise_conv2d_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                           const Tensor& y) {
  depthwise_conv2d(x, w, bias, p, y, DepthwiseEpilogue::Gelu);
}

void depthwise_conv2d_gelu_backward(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                                    const Tensor& g, const Tensor& gh) {
  depthwise_conv2d(x, w, bias, p, gh, DepthwiseEpilogue::GeluGradient, g);
}

}  // namespace tessera::cuda
