// The CUDA convolution kernels: depthwise convolutions with one output channel per input channel
// go to our own kernels, in any layout (cuda/depthwise_conv.h), unless a lever sends them to cuDNN
// (ops/kernels/conv.h: TESSERA_DEPTHWISE_CUDNN_NHWC, in NHWC or NCHW, or
// TESSERA_DEPTHWISE_ANY_LAYOUT=0, in NCHW); for the others the convolution itself and its input and
// filter gradients are a plan (cuda/plans/conv_plan.h) executed by cuDNN on a GPU or by the
// emulator's reference of it, one library call each;
// the bias is ours — added by an element-wise kernel, and its gradient a per-channel sum split
// across many blocks and combined in a fixed order (cuda/middle_sums.h: deterministic, no atomics;
// CoaT's CRPE has 16-24 channels of ~400k values each at batch 128, which one block per channel,
// the TESSERA_SPLIT_REDUCTIONS=0 path, leaves to a few SMs; an NHWC gradient's sums are the
// depthwise kernels' chunks, which read it as it lies). Beside a bfloat16/float16 output the
// bias and its gradient are float32 (core/dtype.h accumulate_dtype), the arithmetic too.
#include <algorithm>
#include <optional>

#include "tessera/core/levers.h"
#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/depthwise_conv.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/libs/dnn.h"
#include "tessera/cuda/middle_sums.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/conv.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

namespace {

// y[i] += bias[channel of i] over a packed y whose channel index is i / inner % channels: inner = H·W
// for NCHW, 1 for NHWC.
template <class S, class A>
__global__ void add_bias(S* y, const A* bias, int64_t n, int64_t channels, int64_t inner) {
  TS_GRID_STRIDE_LOOP(i, n) y[i] = convert::convert<A, S>(convert::convert<S, A>(y[i]) + bias[i / inner % channels]);
}

// gb[o] = Σ_n Σ_l gy[n, o, l].
template <class S, class A>
__global__ void bias_grad(const S* gy, int64_t batch, int64_t channels, int64_t L, A* gb) {
  TS_SHARED(A, scratch, 32);
  for (int64_t o = blockIdx.x; o < channels; o += gridDim.x) {
    A acc = 0;
    for (int64_t i = threadIdx.x; i < batch * L; i += blockDim.x)
      acc += convert::convert<S, A>(gy[(i / L * channels + o) * L + i % L]);
    acc = block_all_reduce(acc, scratch, SumOp{}, A(0));
    if (threadIdx.x == 0) gb[o] = acc;
  }
}

// The cuDNN format a convolution's activations all lie packed in, or none: our own depthwise
// kernels, which take any layout. A depthwise one-to-one convolution goes to cuDNN under
// TESSERA_DEPTHWISE_CUDNN_NHWC in NCHW or NHWC, with TESSERA_DEPTHWISE_ANY_LAYOUT off in NCHW, and
// only where every operand lies so (the front end lays them out so; a lever flipped between a
// forward and its backward, or depthwise_conv2d_gelu's backward, may hand over others); every other
// convolution in NCHW, as the front end lays it out.
std::optional<ConvFormat> cudnn_format(const Shape& x, const Shape& w, const Conv2dParams& p,
                                       std::initializer_list<Tensor> operands) {
  if (!depthwise_one_to_one(x, w, p)) return ConvFormat::Nchw;
  const auto all = [&](bool (*packed)(const Tensor&)) {
    return std::all_of(operands.begin(), operands.end(), [&](const Tensor& t) { return !t.defined() || packed(t); });
  };
  const bool nchw = all([](const Tensor& t) { return t.is_contiguous(); });
  if (levers().depthwise_cudnn_nhwc) {
    if (nchw) return ConvFormat::Nchw;
    if (all(is_channels_last)) return ConvFormat::Nhwc;
  } else if (!levers().depthwise_any_layout && nchw) {
    return ConvFormat::Nchw;
  }
  return std::nullopt;
}

}  // namespace

void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y) {
  if (y.numel() == 0) return;
  const std::optional<ConvFormat> format = cudnn_format(x.shape(), w.shape(), p, {x, y});
  if (!format) {
    depthwise_conv2d(x, w, bias, p, y);
    return;
  }
  KernelContext ctx(y);
  const ConvPlan plan = plan_conv2d(x.shape(), w.shape(), p, y.shape(), y.dtype(), *format);
  count_device_launch(LaunchKind::Library);  // one cuDNN call
  conv_forward(plan, x.device_raw_data(), w.device_raw_data(), y.device_raw_data(), ctx.stream, y.device().index);
  if (!bias.defined()) return;
  const int64_t n = y.numel(), inner = *format == ConvFormat::Nhwc ? 1 : y.size(2) * y.size(3);
  dispatch_floating(y.dtype(), "conv2d", [&]<class S, class A>() {
    launch("conv2d bias", add_bias<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, y.device_data<S>(),
           bias.device_data<A>(), n, y.size(1), inner);
  });
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p, const Tensor& gx,
                     const Tensor& gw, const Tensor& gb) {
  // Only the bias gradient wanted: the filter's shape is unknown here, but a gy that is not
  // contiguous came from a depthwise convolution, whose kernels sum it as it lies.
  const bool bias_only = !gx.defined() && !gw.defined();
  const Shape x_shape = bias_only ? Shape() : x.defined() ? x.shape() : gx.shape();
  const Shape w_shape = bias_only ? Shape() : w.defined() ? w.shape() : gw.shape();
  const std::optional<ConvFormat> format = bias_only
                                               ? (gy.is_contiguous() ? std::optional(ConvFormat::Nchw) : std::nullopt)
                                               : cudnn_format(x_shape, w_shape, p, {x, gy, gx});
  if (!format) {
    depthwise_conv2d_backward(x, w, gy, p, gx, gw, gb);
    return;
  }
  KernelContext ctx(gy);
  const int device = gy.device().index;
  if (gx.defined() || gw.defined()) {
    const ConvPlan plan = plan_conv2d(x_shape, w_shape, p, gy.shape(), gy.dtype(), *format);
    if (gx.defined() && gx.numel() > 0) {
      count_device_launch(LaunchKind::Library);
      conv_backward_data(plan, w.device_raw_data(), gy.device_raw_data(), gx.device_raw_data(), ctx.stream, device);
    }
    if (gw.defined() && gw.numel() > 0) {
      count_device_launch(LaunchKind::Library);
      conv_backward_filter(plan, x.device_raw_data(), gy.device_raw_data(), gw.device_raw_data(), ctx.stream, device);
    }
  }
  if (gb.defined() && gb.numel() > 0) {
    if (*format == ConvFormat::Nhwc) {
      depthwise_conv2d_backward(Tensor(), Tensor(), gy, p, Tensor(), Tensor(), gb);
      return;
    }
    const int64_t channels = gy.size(1), L = gy.size(2) * gy.size(3);
    dispatch_floating(gy.dtype(), "conv2d_backward", [&]<class S, class A>() {
      if (levers().split_reductions) {
        const Tensor partial = Tensor::empty({channels * middle_chunks(gy.size(0), L)}, DType::Float64, gy.device());
        launch_middle_reduction(ctx.stream, gy.device_data<S>(), gy.size(0), channels, L, SumOp{}, 0.0,
                                partial.device_data<double>(), gb.device_data<A>());
        return;
      }
      launch("conv2d bias gradient", bias_grad<S, A>, row_blocks(channels), kRowThreads, 0, ctx.stream,
             gy.device_data<S>(), gy.size(0), channels, L, gb.device_data<A>());
    });
  }
}

}  // namespace tessera::cuda
