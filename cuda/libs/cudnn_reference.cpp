// The emulator's cuDNN: direct loops implementing cuDNN's convolution contract (cross-correlation
// of NCHW with [K, C/groups, R, S], zero padding, strides, dilations, groups) for the forward pass
// and both gradients, on the host (device memory is host memory in the emulator). Independent of
// the CPU backend's im2col kernels, so a wrong plan gives wrong numbers in the device tests.
#include "core/error.h"
#include "cuda/libs/dnn.h"

namespace tessera::cuda {

namespace {

// Calls f(n, k, oh, ow, c, ih, iw, y_index, x_index, w_index) for every product term of the
// convolution whose input position lies inside the (unpadded) input.
template <class F>
void for_each_term(const ConvPlan& p, const F& f) {
  const int cg = p.channels_per_group(), kg = p.k / p.groups;
  for (int n = 0; n < p.n; ++n)
    for (int k = 0; k < p.k; ++k) {
      const int g = k / kg;
      for (int oh = 0; oh < p.p; ++oh)
        for (int ow = 0; ow < p.q; ++ow) {
          const int64_t yi = ((static_cast<int64_t>(n) * p.k + k) * p.p + oh) * p.q + ow;
          for (int c = 0; c < cg; ++c)
            for (int r = 0; r < p.r; ++r) {
              const int ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
              if (ih < 0 || ih >= p.h) continue;
              for (int s = 0; s < p.s; ++s) {
                const int iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
                if (iw < 0 || iw >= p.w) continue;
                const int64_t xi = ((static_cast<int64_t>(n) * p.c + g * cg + c) * p.h + ih) * p.w + iw;
                const int64_t wi = ((static_cast<int64_t>(k) * cg + c) * p.r + r) * p.s + s;
                f(yi, xi, wi);
              }
            }
        }
    }
}

int64_t count(int a, int b, int c, int d) { return static_cast<int64_t>(a) * b * c * d; }

}  // namespace

void conv_forward(const ConvPlan& p, const void* x, const void* w, void* y, cudaStream_t, int) {
  TS_DISPATCH_FLOAT(p.dtype, "conv2d", [&] {
    using T = scalar_t;
    const T* xp = static_cast<const T*>(x);
    const T* wp = static_cast<const T*>(w);
    T* yp = static_cast<T*>(y);
    std::fill(yp, yp + count(p.n, p.k, p.p, p.q), T(0));
    for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { yp[yi] += xp[xi] * wp[wi]; });
  });
}

void conv_backward_data(const ConvPlan& p, const void* w, const void* dy, void* dx, cudaStream_t, int) {
  TS_DISPATCH_FLOAT(p.dtype, "conv2d_backward", [&] {
    using T = scalar_t;
    const T* wp = static_cast<const T*>(w);
    const T* gy = static_cast<const T*>(dy);
    T* gx = static_cast<T*>(dx);
    std::fill(gx, gx + count(p.n, p.c, p.h, p.w), T(0));
    for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { gx[xi] += gy[yi] * wp[wi]; });
  });
}

void conv_backward_filter(const ConvPlan& p, const void* x, const void* dy, void* dw, cudaStream_t, int) {
  TS_DISPATCH_FLOAT(p.dtype, "conv2d_backward", [&] {
    using T = scalar_t;
    const T* xp = static_cast<const T*>(x);
    const T* gy = static_cast<const T*>(dy);
    T* gw = static_cast<T*>(dw);
    std::fill(gw, gw + count(p.k, p.channels_per_group(), p.r, p.s), T(0));
    for_each_term(p, [&](int64_t yi, int64_t xi, int64_t wi) { gw[wi] += gy[yi] * xp[xi]; });
  });
}

}  // namespace tessera::cuda
