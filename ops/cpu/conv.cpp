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

// db[o] = Σ_n Σ_positions dy[n, o], in parallel over channels, for dy [N, O, OH, OW] laid out as
// `s` (a plane whose positions are dense is summed as one run).
template <class T>
void bias_backward(const Shape& dy_shape, Strides4 s, const T* gy, T* gb) {
  const int64_t batch = dy_shape[0], channels = dy_shape[1], rows = dy_shape[2], cols = dy_shape[3];
  const int64_t L = rows * cols;
  const bool dense_plane = s.s[3] == 1 && (s.s[2] == cols || rows == 1);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(batch * L, 1));
  parallel_for(0, channels, grain, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      T sum = T(0);
      for (int64_t n = 0; n < batch; ++n) {
        const T* plane = gy + s(n, o, 0, 0);
        if (dense_plane) {
          sum += CVec<T>(plane, L).sum();
          continue;
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t q = 0; q < cols; ++q) sum += plane[s(0, 0, r, q)];
      }
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
    if (g.depthwise())
      depthwise_forward<scalar_t>(g, x.data<scalar_t>(), strides4(x), w.data<scalar_t>(), b, y.data<scalar_t>(),
                                  strides4(y));
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
        depthwise_backward<scalar_t>(g, xp, strides4(x), wp, gyp, strides4(gy), gxp, strides4(gx), gwp);
      } else {
        dense_backward<scalar_t>(g, xp, wp, gyp, gxp, gwp);
      }
    }
    if (gb.defined()) bias_backward<scalar_t>(gy.shape(), strides4(gy), gy.data<scalar_t>(), gb.data<scalar_t>());
  });
}

}  // namespace cpu

}  // namespace tessera
