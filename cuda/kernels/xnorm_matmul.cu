// CUDA kernels of xnorm_matmul (ops/kernels/xnorm_matmul.h; formulas as ops/cpu/xnorm_matmul.cpp):
// UFO-ViT's scaled queries, a thread per element, reading and writing through the operands' strides
// (the backward a thread per row, for its row sums).
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/xnorm_matmul.h"

namespace tessera::cuda {

namespace {

// ---- UFO-ViT's XNorm of the queries: forward a thread per element, backward a thread per row -------

template <class T>
__global__ void xnorm_matmul_elements(const T* p, const T* nq, const T* gamma, HeadShape sh, T eps, T* y, Strides4 yo) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.H * sh.N * sh.d) {
    const int64_t r = i / sh.d, c = i % sh.d, b = r / (sh.H * sh.N), h = r / sh.N % sh.H, n = r % sh.N;
    y[yo(b, h, n, c)] = (gamma[h] / dm::max(nq[r], eps)) * p[i];
  }
}

template <class T>
__global__ void xnorm_matmul_grads(const T* g, Strides4 go, const T* p, const T* nq, const T* gamma, HeadShape sh,
                                   T eps, T* gp, T* row_terms) {
  TS_GRID_STRIDE_LOOP(r, sh.B * sh.H * sh.N) {
    const int64_t b = r / (sh.H * sh.N), h = r / sh.N % sh.H, n = r % sh.N;
    const T norm = dm::max(nq[r], eps), factor = gamma[h] / norm;
    T acc = 0;
    for (int64_t c = 0; c < sh.d; ++c) {
      const T gv = g[go(b, h, n, c)];
      gp[r * sh.d + c] = factor * gv;
      acc += gv * p[r * sh.d + c];
    }
    row_terms[r] = acc / norm;
  }
}

}  // namespace

void xnorm_matmul(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y) {
  const int64_t n = p.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(p.dtype(), "xnorm_matmul", [&] {
    using T = scalar_t;
    launch("xnorm_matmul", xnorm_matmul_elements<T>, blocks_for(n), kBlockThreads, 0, ctx.stream, p.device_data<T>(),
           nq.device_data<T>(), gamma.device_data<T>(), head_shape(p), static_cast<T>(eps), y.device_data<T>(),
           strides4(y));
  });
}

void xnorm_matmul_backward(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps,
                           const Tensor& gp, const Tensor& row_terms) {
  const int64_t rows = nq.numel();
  if (rows == 0) return;
  KernelContext ctx(gp);
  TS_DISPATCH_FLOAT(p.dtype(), "xnorm_matmul_backward", [&] {
    using T = scalar_t;
    launch("xnorm_matmul_backward", xnorm_matmul_grads<T>, blocks_for(rows), kBlockThreads, 0, ctx.stream,
           g.device_data<T>(), strides4(g), p.device_data<T>(), nq.device_data<T>(), gamma.device_data<T>(),
           head_shape(p), static_cast<T>(eps), gp.device_data<T>(), row_terms.device_data<T>());
  });
}

}  // namespace tessera::cuda
