// CUDA kernels of factor_attention_merge (ops/kernels/factor_attention_merge.h; formulas as
// ops/cpu/factor_attention_merge.cpp): CoaT's attention output, a thread per element, reading and
// writing through the operands' strides.
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/factor_attention_merge.h"

namespace tessera::cuda {

namespace {

// ---- CoaT's attention output: a thread per element of the token-layout output ---------------------

template <class T>
__global__ void factor_attention_merge_elements(const T* m, Strides4 mo, const T* q, Strides4 qo, const T* cv,
                                                Strides4 co, HeadShape sh, T scale, T* y) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.N * sh.H * sh.d) {
    const int64_t c = i % sh.d, h = (i / sh.d) % sh.H, r = i / (sh.d * sh.H), b = r / sh.N, n = r % sh.N;
    const T attended = m[mo(b, h, n, c)] * scale;
    y[i] = n == 0 ? attended : attended + q[qo(b, h, n, c)] * cv[co(b, h, n - 1, c)];
  }
}

template <class T>
__global__ void factor_attention_merge_grads(const T* g, const T* q, Strides4 qo, const T* cv, Strides4 co,
                                             HeadShape sh, T scale, T* gm, T* gq, T* gcv) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.N * sh.H * sh.d) {
    const int64_t c = i % sh.d, h = (i / sh.d) % sh.H, r = i / (sh.d * sh.H), b = r / sh.N, n = r % sh.N;
    const T gv = g[i];
    const int64_t at = ((b * sh.H + h) * sh.N + n) * sh.d + c;
    if (gm) gm[at] = gv * scale;
    if (gq) gq[at] = n == 0 ? T(0) : gv * cv[co(b, h, n - 1, c)];
    if (gcv && n > 0) gcv[((b * sh.H + h) * (sh.N - 1) + n - 1) * sh.d + c] = gv * q[qo(b, h, n, c)];
  }
}

}  // namespace

void factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale, const Tensor& y) {
  const int64_t n = y.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(m.dtype(), "factor_attention_merge", [&] {
    using T = scalar_t;
    launch("factor_attention_merge", factor_attention_merge_elements<T>, blocks_for(n), kBlockThreads, 0, ctx.stream,
           m.device_data<T>(), strides4(m), q.device_data<T>(), strides4(q), cv.device_data<T>(), strides4(cv),
           head_shape(m), static_cast<T>(scale), y.device_data<T>());
  });
}

void factor_attention_merge_backward(const Tensor& g, const Tensor& q, const Tensor& cv, double scale, const Tensor& gm,
                                     const Tensor& gq, const Tensor& gcv) {
  const int64_t n = g.numel();
  if (n == 0) return;
  KernelContext ctx(g);
  TS_DISPATCH_FLOAT(q.dtype(), "factor_attention_merge_backward", [&] {
    using T = scalar_t;
    launch("factor_attention_merge_backward", factor_attention_merge_grads<T>, blocks_for(n), kBlockThreads, 0,
           ctx.stream, g.device_data<T>(), q.device_data<T>(), strides4(q), cv.device_data<T>(), strides4(cv),
           head_shape(q), static_cast<T>(scale), device_ptr_or_null<T>(gm), device_ptr_or_null<T>(gq),
           device_ptr_or_null<T>(gcv));
  });
}

}  // namespace tessera::cuda
