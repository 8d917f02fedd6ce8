// CUDA kernels of xnorm_matmul (ops/kernels/xnorm_matmul.h; formulas as ops/cpu/xnorm_matmul.cpp):
// UFO-ViT's scaled queries, a thread per element, reading and writing through the operands' strides
// (the backward a thread per row, for its row sums). bfloat16 and float16 compute in float32.
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/xnorm_matmul.h"

namespace tessera::cuda {

namespace {

// ---- UFO-ViT's XNorm of the queries: forward a thread per element, backward a thread per row -------

template <class S, class A>
__global__ void xnorm_matmul_elements(const S* p, const S* nq, const A* gamma, HeadShape sh, A eps, S* y, Strides4 yo) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.H * sh.N * sh.d) {
    const int64_t r = i / sh.d, c = i % sh.d, b = r / (sh.H * sh.N), h = r / sh.N % sh.H, n = r % sh.N;
    y[yo(b, h, n, c)] =
        convert::convert<A, S>((gamma[h] / dm::max(convert::convert<S, A>(nq[r]), eps)) * convert::convert<S, A>(p[i]));
  }
}

template <class S, class A>
__global__ void xnorm_matmul_grads(const S* g, Strides4 go, const S* p, const S* nq, const A* gamma, HeadShape sh,
                                   A eps, S* gp, S* row_terms) {
  TS_GRID_STRIDE_LOOP(r, sh.B * sh.H * sh.N) {
    const int64_t b = r / (sh.H * sh.N), h = r / sh.N % sh.H, n = r % sh.N;
    const A norm = dm::max(convert::convert<S, A>(nq[r]), eps), factor = gamma[h] / norm;
    A acc = 0;
    for (int64_t c = 0; c < sh.d; ++c) {
      const A gv = convert::convert<S, A>(g[go(b, h, n, c)]);
      gp[r * sh.d + c] = convert::convert<A, S>(factor * gv);
      acc += gv * convert::convert<S, A>(p[r * sh.d + c]);
    }
    row_terms[r] = convert::convert<A, S>(acc / norm);
  }
}

}  // namespace

void xnorm_matmul(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y) {
  const int64_t n = p.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  dispatch_floating(p.dtype(), "xnorm_matmul", [&]<class S, class A>() {
    launch("xnorm_matmul", xnorm_matmul_elements<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, p.device_data<S>(),
           nq.device_data<S>(), gamma.device_data<A>(), head_shape(p), static_cast<A>(eps), y.device_data<S>(),
           strides4(y));
  });
}

void xnorm_matmul_backward(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps,
                           const Tensor& gp, const Tensor& row_terms) {
  const int64_t rows = nq.numel();
  if (rows == 0) return;
  KernelContext ctx(gp);
  dispatch_floating(p.dtype(), "xnorm_matmul_backward", [&]<class S, class A>() {
    launch("xnorm_matmul_backward", xnorm_matmul_grads<S, A>, blocks_for(rows), kBlockThreads, 0, ctx.stream,
           g.device_data<S>(), strides4(g), p.device_data<S>(), nq.device_data<S>(), gamma.device_data<A>(),
           head_shape(p), static_cast<A>(eps), gp.device_data<S>(), row_terms.device_data<S>());
  });
}

}  // namespace tessera::cuda
