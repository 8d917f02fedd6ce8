// depthwise_conv2d_gelu (ops/depthwise_conv2d_gelu.h): argument checks, dispatch to
// ops/kernels/depthwise_conv2d_gelu.h, and the gradient.
//   y = gelu(h), h = x ⋆ w + b:  gh = g·gelu'(h), then gx, gw, gb are the convolution's gradients
//   for upstream gradient gh (conv2d_backward_kernel).
// Why h is recomputed rather than kept: keeping it costs a write forward and a read backward of an
// activation-sized tensor, and the memory between the passes; recomputing it reads x, which the
// filter gradient keeps anyway, and the gh pass reads x in place of h. In activations A read or
// written: forward 2A (x in, y out; the composition 4A: conv x -> h, GELU h -> y), backward 3A +
// the convolution's 3A (the composition the same: GELU's gradient g, h -> gh, then the
// convolution's); nine multiply-adds per element are the price.
#include "tessera/ops/depthwise_conv2d_gelu.h"

#include "tessera/autograd/flop_counter.h"
#include "tessera/autograd/function.h"
#include "tessera/core/autocast.h"
#include "tessera/ops/autocast_weights.h"
#include "tessera/ops/conv.h"
#include "tessera/ops/conv_common.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/fused_common.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

Tensor depthwise_conv2d_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
                             std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation) {
  // The op's id, and its name for messages and saved tensors (constant: the backward closure reads
  // them without capturing).
  constexpr OpId kOp = OpId::depthwise_conv2d_gelu;
  constexpr const char* op = op_name(kOp);
  TS_CHECK(x.defined() && x.dim() == 4, op, ": expected input [N, C, H, W], got ",
           x.defined() ? shape_str(x.shape()) : "an undefined tensor");
  const int64_t channels = x.size(1);
  check_conv(op, 2, x, weight, bias, stride.data(), padding.data(), dilation.data(), channels);
  const Conv2dParams p{stride, padding, dilation, channels};
  TS_CHECK(depthwise_one_to_one(x.shape(), weight.shape(), p), op, ": expected weight [", channels,
           ", 1, kH, kW] (one output channel per input channel) for input ", x.shape(), ", got ", weight.shape());
  TraceScope trace;
  // Under autocast the convolution computes in the low precision (core/autocast.h): with low
  // activations the fused op runs on the rounded operands, with float32 activations the composition
  // does (the convolution's result returns to float32 before its bias and GELU).
  if (const auto low = autocast_for(x, weight)) {
    if (amp_activations() == AmpActivations::Low)
      return depthwise_conv2d_gelu(x.to(*low), autocast_cast(weight, *low), bias, stride, padding, dilation);
    return gelu(conv2d(x, weight, bias, stride, padding, dilation, channels));
  }
  // For a backward, contiguous: LPI's BatchNorm then takes its training statistics over NCHW planes
  // without a copy. Without one, in x's dim order (a token map's): BatchNorm in eval and the next
  // depthwise convolution read a channels-last map as it lies, and LPI's output is tokens again
  // without a transpose.
  const Shape y_shape = conv2d_output_shape(x.shape(), weight.shape(), p);
  Tensor y = autograd::needs_grad({x, weight, bias})
                 ? Tensor::empty(y_shape, x.dtype(), x.device())
                 : Tensor::empty_in_order(y_shape, x.strides(), x.dtype(), x.device());
  if (y.numel() > 0)
    depthwise_conv2d_gelu_kernel[x.device()](x.detach(), weight.detach().contiguous(), contiguous_or_undefined(bias), p,
                                             y);
  FlopCounter::add(y.numel() * weight.size(2) * weight.size(3));
  if (autograd::needs_grad({x, weight, bias}))
    autograd::record(
        "DepthwiseConv2dGeluBackward", {x, weight, bias}, y,
        [sx = SavedTensor(x), sw = SavedTensor(weight), sb = bias.defined() ? SavedTensor(bias) : SavedTensor(), p,
         x_strides = x.strides()](const Tensor& g, const GradMask& needs) {
          const Tensor xv = sx.unpack(op), w = sw.unpack(op).contiguous(),
                       b = sb.defined() ? sb.unpack(op).contiguous() : Tensor();
          // GELU's gradient in x's dim order: for a token map the convolution's gradients then read
          // it as they read x.
          const Tensor gh = Tensor::empty_in_order(g.shape(), x_strides, g.dtype(), g.device());
          if (gh.numel() > 0) depthwise_conv2d_gelu_backward_kernel[g.device()](xv, w, b, p, g, gh);
          const Tensor gx = needs[0] ? Tensor::empty_in_order(xv.shape(), x_strides, g.dtype(), g.device()) : Tensor();
          const Tensor gw = needs[1] ? Tensor::empty(w.shape(), g.dtype(), g.device()) : Tensor();
          const Tensor gb = needs[2] ? Tensor::empty({w.size(0)}, accumulate_dtype(g.dtype()), g.device()) : Tensor();
          conv2d_backward_kernel[g.device()](needs[1] ? xv : Tensor(), needs[0] ? w : Tensor(), gh, p, gx, gw, gb);
          return std::vector<Tensor>{gx, gw, gb};
        });
  if (trace.outermost()) trace.record(kOp, {x, weight, bias}, {y}, conv_trace_args(p));
  return y;
}

}  // namespace tessera
