// conv2d / conv1d: argument checks (PyTorch semantics), dispatch to the convolution kernels
// (ops/kernels/conv.h) and the gradient node; the checks and the output shape are shared with
// depthwise_conv2d_gelu (ops/conv_common.h). conv1d is conv2d over [N, C, 1, L] (views, so its
// gradient comes for free).
#include "tessera/ops/conv.h"

#include <algorithm>
#include <string>

#include "tessera/autograd/function.h"
#include "tessera/core/autocast.h"
#include "tessera/core/levers.h"
#include "tessera/ops/conv_common.h"
#include "tessera/ops/elementwise.h"
#include "tessera/autograd/flop_counter.h"
#include "tessera/ops/autocast_weights.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

void check_conv(const char* op, int64_t spatial, const Tensor& x, const Tensor& weight, const Tensor& bias,
                const int64_t* stride, const int64_t* padding, const int64_t* dilation, int64_t groups) {
  const std::string dims = spatial == 2 ? "H, W" : "L";
  const std::string kdims = spatial == 2 ? "kH, kW" : "k";
  TS_CHECK(x.defined() && weight.defined(), op, ": input or weight is an undefined tensor");
  TS_CHECK(x.dim() == spatial + 2, op, ": expected input [N, C, ", dims, "], got ", x.shape());
  TS_CHECK(weight.dim() == spatial + 2, op, ": expected weight [O, C/groups, ", kdims, "], got ", weight.shape());
  TS_CHECK(is_floating(x.dtype()) && (x.dtype() == weight.dtype() || autocast_for(x, weight)), op,
           ": expected input and weight of the same floating dtype, got ", describe(x), " and ", describe(weight));
  TS_CHECK(x.device() == weight.device(), op, ": input and weight on different devices, ", describe(x), " vs ",
           describe(weight));
  TS_CHECK(groups >= 1, op, ": groups must be positive, got ", groups);
  const int64_t c = x.size(1), o = weight.size(0);
  TS_CHECK(c % groups == 0, op, ": groups = ", groups, " does not divide the ", c, " input channels of input ",
           x.shape());
  TS_CHECK(o % groups == 0, op, ": groups = ", groups, " does not divide the ", o, " output channels of weight ",
           weight.shape());
  TS_CHECK(weight.size(1) == c / groups, op, ": expected weight [O, C/groups, ", kdims,
           "] with C/groups = ", c / groups, " for input ", x.shape(), " and groups = ", groups, ", got ",
           weight.shape());
  if (bias.defined()) {
    // A per-channel parameter, in the input's accumulation dtype (float32 beside a half input).
    TS_CHECK(bias.dtype() == accumulate_dtype(x.dtype()) && bias.device() == x.device(), op, ": bias ", describe(bias),
             " does not match input ", describe(x), " (expected ", dtype_name(accumulate_dtype(x.dtype())), ")");
    TS_CHECK(bias.shape() == Shape{o}, op, ": expected bias [", o, "] for weight ", weight.shape(), ", got ",
             bias.shape());
  }
  for (int64_t d = 0; d < spatial; ++d) {
    TS_CHECK(stride[d] >= 1 && dilation[d] >= 1 && padding[d] >= 0, op,
             ": expected stride >= 1, dilation >= 1 and padding >= 0, got stride ", stride[d], ", dilation ",
             dilation[d], ", padding ", padding[d]);
    TS_CHECK(weight.size(2 + d) >= 1, op, ": weight ", weight.shape(), " has an empty kernel dim");
    const int64_t extent = dilation[d] * (weight.size(2 + d) - 1) + 1, padded = x.size(2 + d) + 2 * padding[d];
    TS_CHECK(extent <= padded, op, ": kernel ", weight.shape(), " (dilated extent ", extent,
             ") is larger than the padded input (size ", padded, ") of input ", x.shape());
  }
}

Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  const auto out = [&](int64_t d) {
    return (x[2 + d] + 2 * p.padding[d] - p.dilation[d] * (w[2 + d] - 1) - 1) / p.stride[d] + 1;
  };
  return {x[0], w[0], out(0), out(1)};
}

std::vector<std::pair<const char*, TraceValue>> conv_trace_args(const Conv2dParams& p) {
  return {{"stride", Shape{p.stride[0], p.stride[1]}},
          {"padding", Shape{p.padding[0], p.padding[1]}},
          {"dilation", Shape{p.dilation[0], p.dilation[1]}},
          {"groups", p.groups}};
}

namespace {

// How conv2d lays out its activations for the kernels (ops/kernels/conv.h says what each device
// does with them): as they lie (Any), or dense NCHW or channels-last.
enum class ConvLayout : uint8_t { Nchw, Nhwc, Any };

// Whether x's dims lie in memory in the order N, H, W, C (largest stride first, ties in dim order,
// as Tensor::empty_in_order orders them), as PyTorch's suggest_memory_format decides channels-last.
bool channels_last_order(const Tensor& x) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x.stride(a) > x.stride(b); });
  return order == std::array<int, 4>{0, 2, 3, 1};
}

ConvLayout conv_layout(const Tensor& x, const Shape& w, const Conv2dParams& p) {
  if (!depthwise_one_to_one(x.shape(), w, p)) return ConvLayout::Nchw;
  if (levers().depthwise_cudnn_nhwc) return channels_last_order(x) ? ConvLayout::Nhwc : ConvLayout::Nchw;
  return levers().depthwise_any_layout ? ConvLayout::Any : ConvLayout::Nchw;
}

// t (detached) for the kernels: as it lies, or dense in the layout, copied only where it is not.
Tensor laid_out(const Tensor& t, ConvLayout layout) {
  if (layout == ConvLayout::Any) return t;
  if (layout == ConvLayout::Nchw) return t.contiguous();
  if (is_channels_last(t)) return t;
  Tensor dense = Tensor::empty_in_order(t.shape(), channels_last_strides(t.shape()), t.dtype(), t.device());
  dense.copy_(t);
  return dense;
}

// A fresh activation in the layout; Any: in the dim order of x's strides, so that a token map's
// output (or gradient) maps back to tokens as a view.
Tensor empty_laid_out(const Shape& shape, ConvLayout layout, const Shape& x_strides, DType dtype, Device device) {
  switch (layout) {
    case ConvLayout::Any: return Tensor::empty_in_order(shape, x_strides, dtype, device);
    case ConvLayout::Nhwc: return Tensor::empty_in_order(shape, channels_last_strides(shape), dtype, device);
    case ConvLayout::Nchw: break;
  }
  return Tensor::empty(shape, dtype, device);
}

// conv2d after check_conv.
Tensor conv2d_checked(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  TraceScope trace;
  const ConvLayout layout = conv_layout(x, weight.shape(), p);
  Tensor y =
      empty_laid_out(conv2d_output_shape(x.shape(), weight.shape(), p), layout, x.strides(), x.dtype(), x.device());
  conv2d_kernel[x.device()](laid_out(x.detach(), layout), weight.detach().contiguous(),
                            bias.defined() ? bias.detach().contiguous() : Tensor(), p, y);
  FlopCounter::add(y.numel() * weight.size(1) * weight.size(2) * weight.size(3));
  if (autograd::needs_grad({x, weight, bias})) {
    // dx needs the weight and dW needs the input: save each only when its partner wants a gradient.
    autograd::record(
        "Conv2dBackward", {x, weight, bias}, y,
        [sx = autograd::needs_grad({weight}) ? SavedTensor(x) : SavedTensor(),
         sw = autograd::needs_grad({x}) ? SavedTensor(weight) : SavedTensor(), x_shape = x.shape(),
         x_strides = x.strides(), w_shape = weight.shape(), o = weight.size(0), p,
         layout](const Tensor& g, const GradMask& needs) {
          const Tensor gy = laid_out(g, layout);
          auto make = [&](bool wanted, const Shape& s, DType dtype) {
            return wanted ? Tensor::empty(s, dtype, gy.device()) : Tensor();
          };
          Tensor gx = needs[0] ? empty_laid_out(x_shape, layout, x_strides, gy.dtype(), gy.device()) : Tensor();
          Tensor gw = make(needs[1], w_shape, gy.dtype()), gb = make(needs[2], {o}, accumulate_dtype(gy.dtype()));
          conv2d_backward_kernel[gy.device()](needs[1] ? laid_out(sx.unpack(op_name(OpId::conv2d)), layout) : Tensor(),
                                              needs[0] ? sw.unpack(op_name(OpId::conv2d)).contiguous() : Tensor(), gy,
                                              p, gx, gw, gb);
          return std::vector<Tensor>{gx, gw, gb};
        });
  }
  if (trace.outermost()) trace.record(OpId::conv2d, {x, weight, bias}, {y}, conv_trace_args(p));
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
              std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) {
  check_conv("conv2d", 2, x, weight, bias, stride.data(), padding.data(), dilation.data(), groups);
  const Conv2dParams p{stride, padding, dilation, groups};
  if (const auto low = autocast_for(x, weight)) {
    // Autocast (core/autocast.h): the convolution in the low precision. With low activations the
    // float32 bias is added in the same kernel (a per-channel parameter: core/dtype.h
    // accumulate_dtype); with float32 activations the result and the bias are added in float32.
    // The casts are ops, so the gradients run the same way back.
    if (amp_activations() == AmpActivations::Low)
      return conv2d_checked(x.to(*low), autocast_cast(weight, *low), bias, p);
    Tensor y = conv2d_checked(x.to(*low), autocast_cast(weight, *low), Tensor(), p).to(DType::Float32);
    return bias.defined() ? y + bias.view({1, weight.size(0), 1, 1}) : y;
  }
  return conv2d_checked(x, weight, bias, p);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  check_conv("conv1d", 1, x, weight, bias, &stride, &padding, &dilation, groups);
  const Conv2dParams p{{1, stride}, {0, padding}, {1, dilation}, groups};
  return conv2d_checked(x.unsqueeze(2), weight.unsqueeze(2), bias, p).squeeze(2);
}

}  // namespace tessera
