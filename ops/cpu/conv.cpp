// CPU convolution kernels: dispatch between the direct depthwise kernel (conv_depthwise.cpp) and
// im2col + GEMM (conv_dense.cpp), the bias gradient, and the KernelTable CPU slots. Activations and
// the weight are float32, float64 or bfloat16; the bias and its gradient are their compute type
// (float32 beside bfloat16: core/dtype.h accumulate_dtype).
#include <algorithm>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/optional_ptr.h"

namespace tessera {

namespace {

using namespace cpu::conv;
using cpu::compute_t;
using cpu::RunIn;
using cpu::value;

// db[o] = Σ_n Σ_positions dy[n, o], in parallel over channels, for dy [N, O, OH, OW] laid out as
// `s` (a plane whose positions are dense is summed as one run), summed in compute_t<S>.
template <class S>
void bias_backward(const Shape& dy_shape, Strides4 s, const S* gy, compute_t<S>* gb) {
  using T = compute_t<S>;
  const int64_t batch = dy_shape[0], channels = dy_shape[1], rows = dy_shape[2], cols = dy_shape[3];
  const int64_t L = rows * cols;
  const bool dense_plane = s.s[3] == 1 && (s.s[2] == cols || rows == 1);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(batch * L, 1));
  parallel_for(0, channels, grain, [&](int64_t o0, int64_t o1) {
    RunIn<S> in;
    for (int64_t o = o0; o < o1; ++o) {
      T sum = T(0);
      for (int64_t n = 0; n < batch; ++n) {
        const S* plane = gy + s(n, o, 0, 0);
        if (dense_plane) {
          sum += CVec<T>(in(plane, L), L).sum();
          continue;
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t q = 0; q < cols; ++q) sum += value(plane[s(0, 0, r, q)]);
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
  TS_DISPATCH_STORED(x.dtype(), "conv2d", [&] {
    using S = storage_t;
    const compute_t<S>* b = ptr_or_null<compute_t<S>>(bias);
    if (g.depthwise()) depthwise_forward<S>(g, x.data<S>(), strides4(x), w.data<S>(), b, y.data<S>(), strides4(y));
    else dense_forward<S>(g, x.data<S>(), w.data<S>(), b, y.data<S>());
  });
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p, const Tensor& gx,
                     const Tensor& gw, const Tensor& gb) {
  TS_DISPATCH_STORED(gy.dtype(), "conv2d_backward", [&] {
    using S = storage_t;
    if (gx.defined() || gw.defined()) {
      const Geometry g =
          geometry(x.defined() ? x.shape() : gx.shape(), w.defined() ? w.shape() : gw.shape(), gy.shape(), p);
      const S *xp = ptr_or_null<S>(x), *wp = ptr_or_null<S>(w), *gyp = gy.data<S>();
      S *gxp = mut_ptr_or_null<S>(gx), *gwp = mut_ptr_or_null<S>(gw);
      if (gy.numel() == 0) {  // no outputs: nothing flows back
        if (gxp) std::fill(gxp, gxp + gx.numel(), S());
        if (gwp) std::fill(gwp, gwp + gw.numel(), S());
      } else if (g.depthwise()) {
        depthwise_backward<S>(g, xp, strides4(x), wp, gyp, strides4(gy), gxp, strides4(gx), gwp);
      } else {
        dense_backward<S>(g, xp, wp, gyp, gxp, gwp);
      }
    }
    if (gb.defined()) bias_backward<S>(gy.shape(), strides4(gy), gy.data<S>(), gb.data<compute_t<S>>());
  });
}

}  // namespace cpu

}  // namespace tessera
