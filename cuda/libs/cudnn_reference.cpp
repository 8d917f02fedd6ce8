// The emulator's cuDNN: direct loops implementing cuDNN's convolution contract (cross-correlation
// of NCHW or NHWC tensors with [K, C/groups, R, S], zero padding, strides, dilations, groups) for
// the forward pass and both gradients, on the host (device memory is host memory in the emulator). Independent of
// the CPU backend's im2col kernels, so a wrong plan gives wrong numbers in the device tests.
// Precision as on a GPU: bfloat16/float16 operands are summed in float32 and the result rounded
// back; with TF32 allowed, float32 operands are first rounded to TF32's 10-bit mantissa.
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/cuda/libs/dnn.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

namespace {

// The offset of element [n, c, h, w] of a packed [N, channels, height, width] tensor in the plan's
// format.
int64_t element(const ConvPlan& p, int n, int c, int h, int w, int channels, int height, int width) {
  if (p.format == ConvFormat::Nhwc) return ((static_cast<int64_t>(n) * height + h) * width + w) * channels + c;
  return ((static_cast<int64_t>(n) * channels + c) * height + h) * width + w;
}

// Calls f(y_index, x_index, w_index) for every product term of the convolution whose input
// position lies inside the (unpadded) input.
template <class F>
void for_each_term(const ConvPlan& p, const F& f) {
  const int cg = p.channels_per_group(), kg = p.k / p.groups;
  for (int n = 0; n < p.n; ++n)
    for (int k = 0; k < p.k; ++k) {
      const int g = k / kg;
      for (int oh = 0; oh < p.p; ++oh)
        for (int ow = 0; ow < p.q; ++ow) {
          const int64_t yi = element(p, n, k, oh, ow, p.k, p.p, p.q);
          for (int c = 0; c < cg; ++c)
            for (int r = 0; r < p.r; ++r) {
              const int ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
              if (ih < 0 || ih >= p.h) continue;
              for (int s = 0; s < p.s; ++s) {
                const int iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
                if (iw < 0 || iw >= p.w) continue;
                const int64_t xi = element(p, n, g * cg + c, ih, iw, p.c, p.h, p.w);
                const int64_t wi = ((static_cast<int64_t>(k) * cg + c) * p.r + r) * p.s + s;
                f(yi, xi, wi);
              }
            }
        }
    }
}

// `count` stored values as the compute type C (TF32-rounded when the plan allows it).
template <class C, class S>
std::vector<C> load(const void* p, int64_t count, const ConvPlan& plan) {
  const S* s = static_cast<const S*>(p);
  std::vector<C> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    C v = static_cast<C>(convert::to_double(s[i]));
    if constexpr (std::is_same_v<C, float>)
      if (plan.math == ConvMath::AllowTf32) v = round_to_tf32(v);
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

template <class S, class C>
void store(const std::vector<C>& v, void* p) {
  S* d = static_cast<S*>(p);
  for (size_t i = 0; i < v.size(); ++i) d[i] = convert::from_double<S>(v[i]);
}

int64_t x_count(const ConvPlan& p) { return static_cast<int64_t>(p.n) * p.c * p.h * p.w; }
int64_t y_count(const ConvPlan& p) { return static_cast<int64_t>(p.n) * p.k * p.p * p.q; }
int64_t w_count(const ConvPlan& p) { return static_cast<int64_t>(p.k) * p.channels_per_group() * p.r * p.s; }

// Runs fn.template operator()<S, C>() for the plan's stored type S and compute type C.
template <class Fn>
void with_types(const ConvPlan& p, const Fn& fn) {
  switch (p.dtype) {
    case DType::Float32: return fn.template operator()<float, float>();
    case DType::Float64: return fn.template operator()<double, double>();
    case DType::BFloat16: return fn.template operator()<BFloat16, float>();
    case DType::Float16: return fn.template operator()<Float16, float>();
    default: throw Error(detail::concat("conv2d (cuda): dtype ", dtype_name(p.dtype), " is not supported"));
  }
}

}  // namespace

void conv_forward(const ConvPlan& plan, const void* x, const void* w, void* y, cudaStream_t stream, int) {
  emu::enqueue(
      stream,
      [p = plan, x, w, y] {
        with_types(p, [&]<class S, class C>() {
          const std::vector<C> xv = load<C, S>(x, x_count(p), p), wv = load<C, S>(w, w_count(p), p);
          std::vector<C> yv(static_cast<size_t>(y_count(p)), C(0));
          for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { yv[yi] += xv[xi] * wv[wi]; });
          store<S>(yv, y);
        });
      },
      "cudnnConvolutionForward");
}

void conv_backward_data(const ConvPlan& plan, const void* w, const void* dy, void* dx, cudaStream_t stream, int) {
  emu::enqueue(
      stream,
      [p = plan, w, dy, dx] {
        with_types(p, [&]<class S, class C>() {
          const std::vector<C> wv = load<C, S>(w, w_count(p), p), gy = load<C, S>(dy, y_count(p), p);
          std::vector<C> gx(static_cast<size_t>(x_count(p)), C(0));
          for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { gx[xi] += gy[yi] * wv[wi]; });
          store<S>(gx, dx);
        });
      },
      "cudnnConvolutionBackwardData");
}

void conv_backward_filter(const ConvPlan& plan, const void* x, const void* dy, void* dw, cudaStream_t stream, int) {
  emu::enqueue(
      stream,
      [p = plan, x, dy, dw] {
        with_types(p, [&]<class S, class C>() {
          const std::vector<C> xv = load<C, S>(x, x_count(p), p), gy = load<C, S>(dy, y_count(p), p);
          std::vector<C> gw(static_cast<size_t>(w_count(p)), C(0));
          for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { gw[wi] += gy[yi] * xv[xi]; });
          store<S>(gw, dw);
        });
      },
      "cudnnConvolutionBackwardFilter");
}

}  // namespace tessera::cuda
