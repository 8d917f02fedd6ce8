// CPU convolution kernels: dispatch between the direct depthwise kernel (conv_depthwise.cpp) and
// im2col + GEMM (conv_dense.cpp), the bias gradient, and the KernelTable CPU slots.
#include <algorithm>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/optional_ptr.h"

namespace tessera {

namespace {

using namespace cpu::conv;

// db[o] = Σ_n Σ_positions dy[n, o], in parallel over channels.
template <class T>
void bias_backward(int64_t batch, int64_t channels, int64_t L, const T* gy, T* gb) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(batch * L, 1));
  parallel_for(0, channels, grain, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      T sum = T(0);
      for (int64_t n = 0; n < batch; ++n) sum += CVec<T>(gy + (n * channels + o) * L, L).sum();
      gb[o] = sum;
    }
  });
}

}  // namespace

namespace cpu {

void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y) {
  const Geometry g = geometry(x.shape(), w.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  TS_DISPATCH_FLOAT(x.dtype(), "conv2d", [&] {
    const scalar_t* b = ptr_or_null<scalar_t>(bias);
    if (g.depthwise()) depthwise_forward<scalar_t>(g, x.data<scalar_t>(), w.data<scalar_t>(), b, y.data<scalar_t>());
    else dense_forward<scalar_t>(g, x.data<scalar_t>(), w.data<scalar_t>(), b, y.data<scalar_t>());
  });
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p, const Tensor& gx,
                     const Tensor& gw, const Tensor& gb) {
  TS_DISPATCH_FLOAT(gy.dtype(), "conv2d_backward", [&] {
    if (gx.defined() || gw.defined()) {
      const Geometry g =
          geometry(x.defined() ? x.shape() : gx.shape(), w.defined() ? w.shape() : gw.shape(), gy.shape(), p);
      const scalar_t *xp = ptr_or_null<scalar_t>(x), *wp = ptr_or_null<scalar_t>(w), *gyp = gy.data<scalar_t>();
      scalar_t *gxp = mut_ptr_or_null<scalar_t>(gx), *gwp = mut_ptr_or_null<scalar_t>(gw);
      if (gy.numel() == 0) {  // no outputs: nothing flows back
        if (gxp) std::fill(gxp, gxp + gx.numel(), scalar_t(0));
        if (gwp) std::fill(gwp, gwp + gw.numel(), scalar_t(0));
      } else if (g.depthwise()) {
        depthwise_backward<scalar_t>(g, xp, wp, gyp, gxp, gwp);
      } else {
        dense_backward<scalar_t>(g, xp, wp, gyp, gxp, gwp);
      }
    }
    if (gb.defined())
      bias_backward<scalar_t>(gy.size(0), gy.size(1), gy.size(2) * gy.size(3), gy.data<scalar_t>(),
                              gb.data<scalar_t>());
  });
}

}  // namespace cpu

}  // namespace tessera
