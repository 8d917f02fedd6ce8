// Depthwise convolution kernels of our own, for operands of any layout (cuda/depthwise_conv.h).
// PyTorch sends channels-last depthwise convolutions to cuDNN's NHWC kernels; timm's LPI input is
// channels-last, so it copies nothing. Ours did: the front end made the token map NCHW before
// cuDNN, forward and backward (on the H100 an LPI forward moved 9.6 MB at about 30 GB/s, and the
// backward was 10.7% of an XCiT step: docs/gpu-report-2026-11-27.md). Here every thread owns one
// output element and walks the taps; threads are numbered in the output's memory order, so for a
// token map neighbouring threads take neighbouring channels and read and write neighbouring
// addresses.
//   forward   y[n,c,p,q]  = b[c] + Σ_{i,j} w[c,i,j]·x[n, c, p·s − pad + i·dil, q·s − pad + j·dil]
//   input     gx[n,c,h,v] = Σ over the taps (i, j) and outputs (p, q) that read (h, v): w[c,i,j]·gy[n,c,p,q]
//             (gathered, so each gx element is written once and no atomics are needed)
//   filter    gw[c,i,j]   = Σ_{n,p,q} gy[n,c,p,q]·x[n, c, ...], and gb[c] = Σ_{n,p,q} gy[n,c,p,q]: fixed
//             chunks of output positions summed in double, then each (tap, channel)'s chunks added in
//             order, as cuda/column_sums.h does: reproducible, whatever the launch shape.
// The forward kernel also finishes depthwise_conv2d_gelu's passes: GELU of the sum, or g·gelu' of it
// (ops/kernels/conv.h DepthwiseEpilogue).
// bfloat16 and float16 compute in float32 beside a float32 bias and bias gradient.
#include <algorithm>
#include <array>

#include "tessera/core/host_device.h"
#include "tessera/cuda/depthwise_conv.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/unary_math.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

namespace {

// Output positions per partial sum of the filter and bias gradients.
constexpr int64_t kPositionsPerChunk = 256;

struct DepthwiseShape {
  int64_t n, c, h, w, oh, ow, kh, kw;
  int64_t sh, sw, ph, pw, dh, dw;  // stride, padding and dilation per spatial dim
  TS_HOST_DEVICE int64_t taps() const { return kh * kw; }
  TS_HOST_DEVICE int64_t positions() const { return n * oh * ow; }  // output positions per channel
};

DepthwiseShape depthwise_shape(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  return {x[0], x[1],        x[2],        x[3],         y[2],         y[3],          w[2],
          w[3], p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1]};
}

// The dims of an [N, C, H, W] operand from its outermost in memory to its innermost (largest
// stride first, ties in dim order), and their sizes: a thread index decoded in this order walks
// the operand's memory in order.
struct WalkOrder {
  int dim[4];
  int64_t size[4];
  // at[d] = the coordinate along dim d of the i-th element in memory order.
  TS_HOST_DEVICE void coords(int64_t i, int64_t (&at)[4]) const {
    for (int k = 3; k >= 0; --k) {
      at[dim[k]] = i % size[k];
      i /= size[k];
    }
  }
};

WalkOrder walk_order(const Shape& shape, Strides4 s) {
  const std::array<int64_t, 4> strides{s.s[0], s.s[1], s.s[2], s.s[3]};
  std::array<int, 4> dims{0, 1, 2, 3};
  std::stable_sort(dims.begin(), dims.end(), [&](int a, int b) { return strides[a] > strides[b]; });
  WalkOrder o{};
  for (int k = 0; k < 4; ++k) {
    o.dim[k] = dims[k];
    o.size[k] = shape[dims[k]];
  }
  return o;
}

// What the forward pass writes for h = x ⋆ w + b (ops/kernels/conv.h DepthwiseEpilogue): h, gelu(h)
// or g·gelu'(h), with g the upstream gradient's element at `at`.
template <DepthwiseEpilogue E, class S, class A>
__device__ A finish(A h, const S* upstream, int64_t at) {
  const UnaryArgs gelu{UnaryOp::GeluErf};
  if constexpr (E == DepthwiseEpilogue::Gelu) return unary_value(gelu, h);
  else if constexpr (E == DepthwiseEpilogue::GeluGradient)
    return unary_derivative(gelu, h, h, convert::convert<S, A>(upstream[at]));
  else return h;
}

template <class S, class A, DepthwiseEpilogue E>
__global__ void depthwise_forward(const S* x, Strides4 sx, const S* w, const A* bias, DepthwiseShape g, WalkOrder order,
                                  const S* upstream, Strides4 su, S* y, Strides4 sy) {
  TS_GRID_STRIDE_LOOP(e, g.n * g.c * g.oh * g.ow) {
    int64_t at[4];
    order.coords(e, at);
    const int64_t n = at[0], c = at[1], p = at[2], q = at[3];
    const S* xc = x + sx(n, c, 0, 0);
    const S* wc = w + c * g.taps();
    A acc = bias ? bias[c] : A(0);
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t h = p * g.sh - g.ph + i * g.dh;
      if (h < 0 || h >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t v = q * g.sw - g.pw + j * g.dw;
        if (v >= 0 && v < g.w)
          acc += convert::convert<S, A>(wc[i * g.kw + j]) * convert::convert<S, A>(xc[sx(0, 0, h, v)]);
      }
    }
    y[sy(n, c, p, q)] = convert::convert<A, S>(finish<E>(acc, upstream, su(n, c, p, q)));
  }
}

// The output index along one spatial dim whose tap k reads input index `in`, or -1 if none does:
// in = out·stride − pad + k·dil.
TS_HOST_DEVICE int64_t reading_output(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t outs) {
  const int64_t t = in + pad - k * dil;
  if (t < 0 || t % stride != 0 || t / stride >= outs) return -1;
  return t / stride;
}

template <class S, class A>
__global__ void depthwise_backward_input(const S* gy, Strides4 sgy, const S* w, DepthwiseShape g, WalkOrder order,
                                         S* gx, Strides4 sgx) {
  TS_GRID_STRIDE_LOOP(e, g.n * g.c * g.h * g.w) {
    int64_t at[4];
    order.coords(e, at);
    const int64_t n = at[0], c = at[1], h = at[2], v = at[3];
    const S* gyc = gy + sgy(n, c, 0, 0);
    const S* wc = w + c * g.taps();
    A acc = 0;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t p = reading_output(h, i, g.sh, g.ph, g.dh, g.oh);
      if (p < 0) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t q = reading_output(v, j, g.sw, g.pw, g.dw, g.ow);
        if (q >= 0) acc += convert::convert<S, A>(wc[i * g.kw + j]) * convert::convert<S, A>(gyc[sgy(0, 0, p, q)]);
      }
    }
    gx[sgx(n, c, h, v)] = convert::convert<A, S>(acc);
  }
}

// Which sums the filter pass makes: taps first .. first + count − 1, where tap g.taps() is the bias
// gradient's Σ gy (first = g.taps() when only the bias gradient is wanted).
struct FilterSums {
  int64_t first, count, chunks;
};

// partial[(k·count + t)·C + c] = Σ over chunk k of the output positions (n, p, q) of gy[n,c,p,q]
// times x at tap first + t (or times 1 for the bias). Channels are the fastest index.
template <class S, class A>
__global__ void depthwise_filter_partials(const S* gy, Strides4 sgy, const S* x, Strides4 sx, DepthwiseShape g,
                                          FilterSums f, double* partial) {
  TS_GRID_STRIDE_LOOP(e, f.chunks * f.count * g.c) {
    const int64_t c = e % g.c, tap = f.first + e / g.c % f.count, k = e / (g.c * f.count);
    const int64_t i = tap / g.kw, j = tap % g.kw, plane = g.oh * g.ow;
    const bool bias = tap == g.taps();
    double acc = 0;
    for (int64_t r = k * kPositionsPerChunk; r < dm::min(g.positions(), (k + 1) * kPositionsPerChunk); ++r) {
      const int64_t n = r / plane, p = r / g.ow % g.oh, q = r % g.ow;
      const double d = convert::convert<S, A>(gy[sgy(n, c, p, q)]);
      if (bias) {
        acc += d;
        continue;
      }
      const int64_t h = p * g.sh - g.ph + i * g.dh, v = q * g.sw - g.pw + j * g.dw;
      if (h >= 0 && h < g.h && v >= 0 && v < g.w) acc += d * convert::convert<S, A>(x[sx(n, c, h, v)]);
    }
    partial[e] = acc;
  }
}

// gw[c, tap] (S) and gb[c] (A): each (tap, channel)'s chunks added in order.
template <class S, class A>
__global__ void depthwise_filter_sums(const double* partial, DepthwiseShape g, FilterSums f, S* gw, A* gb) {
  TS_GRID_STRIDE_LOOP(e, f.count * g.c) {
    const int64_t c = e % g.c, t = e / g.c, tap = f.first + t;
    double acc = 0;
    for (int64_t k = 0; k < f.chunks; ++k) acc += partial[(k * f.count + t) * g.c + c];
    if (tap == g.taps()) gb[c] = static_cast<A>(acc);
    else gw[c * g.taps() + tap] = convert::convert<A, S>(static_cast<A>(acc));
  }
}

}  // namespace

void depthwise_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y,
                      DepthwiseEpilogue epilogue, const Tensor& upstream) {
  if (y.numel() == 0) return;
  KernelContext ctx(y);
  const DepthwiseShape g = depthwise_shape(x.shape(), w.shape(), y.shape(), p);
  dispatch_floating(y.dtype(), "conv2d (depthwise)", [&]<class S, class A>() {
    const auto run = [&]<DepthwiseEpilogue E>(const char* name) {
      launch(name, depthwise_forward<S, A, E>, blocks_for(y.numel()), kBlockThreads, 0, ctx.stream, x.device_data<S>(),
             strides4(x), w.device_data<S>(), device_ptr_or_null<A>(bias), g, walk_order(y.shape(), strides4(y)),
             device_ptr_or_null<S>(upstream), strides4(upstream), y.device_data<S>(), strides4(y));
    };
    switch (epilogue) {
      case DepthwiseEpilogue::None: return run.template operator()<DepthwiseEpilogue::None>("depthwise_conv2d");
      case DepthwiseEpilogue::Gelu: return run.template operator()<DepthwiseEpilogue::Gelu>("depthwise_conv2d_gelu");
      case DepthwiseEpilogue::GeluGradient:
        return run.template operator()<DepthwiseEpilogue::GeluGradient>("depthwise_conv2d_gelu gradient");
    }
  });
}

void depthwise_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p,
                               const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  KernelContext ctx(gy);
  // With only the bias gradient wanted, x's and w's shapes are unknown and unneeded: the sums over
  // gy take its shape, and a 1x1 filter stands in.
  const Shape xs = x.defined() ? x.shape() : gx.defined() ? gx.shape() : gy.shape();
  const Shape ws = w.defined() ? w.shape() : gw.defined() ? gw.shape() : Shape{gy.size(1), 1, 1, 1};
  const DepthwiseShape g = depthwise_shape(xs, ws, gy.shape(), p);
  dispatch_floating(gy.dtype(), "conv2d_backward (depthwise)", [&]<class S, class A>() {
    if (gx.defined() && gx.numel() > 0)
      launch("depthwise_conv2d input gradient", depthwise_backward_input<S, A>, blocks_for(gx.numel()), kBlockThreads,
             0, ctx.stream, gy.device_data<S>(), strides4(gy), w.device_data<S>(), g,
             walk_order(gx.shape(), strides4(gx)), gx.device_data<S>(), strides4(gx));
    const bool filter = gw.defined() && gw.numel() > 0, bias = gb.defined() && gb.numel() > 0;
    if (!filter && !bias) return;
    const FilterSums f{filter ? 0 : g.taps(), (filter ? g.taps() : 0) + (bias ? 1 : 0),
                       std::max<int64_t>(1, (g.positions() + kPositionsPerChunk - 1) / kPositionsPerChunk)};
    const Tensor partial = Tensor::empty({f.chunks * f.count * g.c}, DType::Float64, gy.device());
    launch("depthwise_conv2d filter gradient", depthwise_filter_partials<S, A>, blocks_for(partial.numel()),
           kBlockThreads, 0, ctx.stream, gy.device_data<S>(), strides4(gy), filter ? x.device_data<S>() : nullptr,
           strides4(x), g, f, partial.device_data<double>());
    launch("depthwise_conv2d filter gradient (chunks)", depthwise_filter_sums<S, A>, blocks_for(f.count * g.c),
           kBlockThreads, 0, ctx.stream, partial.device_data<double>(), g, f, filter ? gw.device_data<S>() : nullptr,
           bias ? gb.device_data<A>() : nullptr);
  });
}

}  // namespace tessera::cuda
