// CUDA kernels of factor_attention_merge (ops/kernels/factor_attention_merge.h; formulas as
// ops/cpu/factor_attention_merge.cpp): CoaT's attention output, a thread per element, reading and
// writing through the operands' strides. bfloat16 and float16 compute in float32.
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/factor_attention_merge.h"

namespace tessera::cuda {

namespace {

// ---- CoaT's attention output: a thread per element of the token-layout output ---------------------

template <class S, class A>
__global__ void factor_attention_merge_elements(const S* m, Strides4 mo, const S* q, Strides4 qo, const S* cv,
                                                Strides4 co, HeadShape sh, A scale, S* y) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.N * sh.H * sh.d) {
    const int64_t c = i % sh.d, h = (i / sh.d) % sh.H, r = i / (sh.d * sh.H), b = r / sh.N, n = r % sh.N;
    const A attended = convert::convert<S, A>(m[mo(b, h, n, c)]) * scale;
    y[i] = convert::convert<A, S>(n == 0 ? attended
                                         : attended + convert::convert<S, A>(q[qo(b, h, n, c)]) *
                                                          convert::convert<S, A>(cv[co(b, h, n - 1, c)]));
  }
}

template <class S, class A>
__global__ void factor_attention_merge_grads(const S* g, const S* q, Strides4 qo, const S* cv, Strides4 co,
                                             HeadShape sh, A scale, S* gm, S* gq, S* gcv) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.N * sh.H * sh.d) {
    const int64_t c = i % sh.d, h = (i / sh.d) % sh.H, r = i / (sh.d * sh.H), b = r / sh.N, n = r % sh.N;
    const A gv = convert::convert<S, A>(g[i]);
    const int64_t at = ((b * sh.H + h) * sh.N + n) * sh.d + c;
    if (gm) gm[at] = convert::convert<A, S>(gv * scale);
    if (gq) gq[at] = convert::convert<A, S>(n == 0 ? A(0) : gv * convert::convert<S, A>(cv[co(b, h, n - 1, c)]));
    if (gcv && n > 0)
      gcv[((b * sh.H + h) * (sh.N - 1) + n - 1) * sh.d + c] =
          convert::convert<A, S>(gv * convert::convert<S, A>(q[qo(b, h, n, c)]));
  }
}

}  // namespace

void factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale, const Tensor& y) {
  const int64_t n = y.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  dispatch_floating(m.dtype(), "factor_attention_merge", [&]<class S, class A>() {
    launch("factor_attention_merge", factor_attention_merge_elements<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream,
           m.device_data<S>(), strides4(m), q.device_data<S>(), strides4(q), cv.device_data<S>(), strides4(cv),
           head_shape(m), static_cast<A>(scale), y.device_data<S>());
  });
}

void factor_attention_merge_backward(const Tensor& g, const Tensor& q, const Tensor& cv, double scale, const Tensor& gm,
                                     const Tensor& gq, const Tensor& gcv) {
  const int64_t n = g.numel();
  if (n == 0) return;
  KernelContext ctx(g);
  dispatch_floating(q.dtype(), "factor_attention_merge_backward", [&]<class S, class A>() {
    launch("factor_attention_merge_backward", factor_attention_merge_grads<S, A>, blocks_for(n), kBlockThreads, 0,
           ctx.stream, g.device_data<S>(), q.device_data<S>(), strides4(q), cv.device_data<S>(), strides4(cv),
           head_shape(q), static_cast<A>(scale), device_ptr_or_null<S>(gm), device_ptr_or_null<S>(gq),
           device_ptr_or_null<S>(gcv));
  });
}

}  // namespace tessera::cuda
