// CUDA kernels of class_attention (ops/kernels/class_attention.h; formulas as
// ops/cpu/class_attention.cpp): a block per (sample, head), a thread per token, then per channel.
// bfloat16 and float16 compute in float32.
#include <limits>
#include <type_traits>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/class_attention.h"

namespace tessera::cuda {

namespace {

// ---- class attention: a block per (sample, head) ------------------------------------------------------
// The N scores live in w (global memory), so any token count fits; a thread per token for the
// scores, a thread per channel for the weighted sums (each adds the tokens in order). w is the
// output a itself when S computes in itself, else scratch in A, so a half a is rounded once, from
// the final weights.

template <class S, class A>
__global__ void class_attention_rows(const S* q, Strides4 qo, const S* k, Strides4 ko, const S* v, Strides4 vo,
                                     HeadShape sh, A scale, A* w, S* a, S* y, Strides4 yo) {
  TS_SHARED(A, scratch, 32);
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    A* wr = w + r * sh.N;
    S* ar = a + r * sh.N;
    A mx = -std::numeric_limits<A>::infinity();
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) {
      A dot = 0;
      for (int64_t c = 0; c < sh.d; ++c)
        dot += convert::convert<S, A>(q[qo(b, h, 0, c)]) * convert::convert<S, A>(k[ko(b, h, n, c)]);
      wr[n] = dot * scale;
      mx = dm::max(mx, wr[n]);
    }
    mx = block_all_reduce(mx, scratch, MaxOp{}, -std::numeric_limits<A>::infinity());
    A total = 0;
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) total += (wr[n] = dm::exp(wr[n] - mx));
    total = block_all_reduce(total, scratch, SumOp{}, A(0));
    const A inv = A(1) / total;
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) ar[n] = convert::convert<A, S>(wr[n] *= inv);
    __syncthreads();  // every weight is final before any thread sums them
    for (int64_t c = threadIdx.x; c < sh.d; c += blockDim.x) {
      A acc = 0;
      for (int64_t n = 0; n < sh.N; ++n) acc += wr[n] * convert::convert<S, A>(v[vo(b, h, n, c)]);
      y[yo(b, h, 0, c)] = convert::convert<A, S>(acc);
    }
  }
}

// gz [B·h·N] is scratch for the softmax's input gradient.
template <class S, class A>
__global__ void class_attention_grads(const S* g, Strides4 go, const S* q, Strides4 qo, const S* k, Strides4 ko,
                                      const S* v, Strides4 vo, const S* a, HeadShape sh, A scale, A* gz, S* gq,
                                      Strides4 gqo, S* gk, Strides4 gko, S* gv, Strides4 gvo) {
  TS_SHARED(A, scratch, 32);
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    const S* ar = a + r * sh.N;
    A* zr = gz + r * sh.N;
    A weighted = 0;  // Σ_n a_n·ga_n
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) {
      A ga = 0;
      for (int64_t c = 0; c < sh.d; ++c)
        ga += convert::convert<S, A>(g[go(b, h, 0, c)]) * convert::convert<S, A>(v[vo(b, h, n, c)]);
      zr[n] = ga;
      weighted += convert::convert<S, A>(ar[n]) * ga;
    }
    weighted = block_all_reduce(weighted, scratch, SumOp{}, A(0));
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) zr[n] = convert::convert<S, A>(ar[n]) * (zr[n] - weighted);
    __syncthreads();  // every gz_n is final before the sums over the tokens
    if (gq)
      for (int64_t c = threadIdx.x; c < sh.d; c += blockDim.x) {
        A acc = 0;
        for (int64_t n = 0; n < sh.N; ++n) acc += zr[n] * convert::convert<S, A>(k[ko(b, h, n, c)]);
        gq[gqo(b, h, 0, c)] = convert::convert<A, S>(scale * acc);
      }
    for (int64_t i = threadIdx.x; i < sh.N * sh.d; i += blockDim.x) {
      const int64_t n = i / sh.d, c = i % sh.d;
      if (gk) gk[gko(b, h, n, c)] = convert::convert<A, S>((scale * zr[n]) * convert::convert<S, A>(q[qo(b, h, 0, c)]));
      if (gv)
        gv[gvo(b, h, n, c)] =
            convert::convert<A, S>(convert::convert<S, A>(ar[n]) * convert::convert<S, A>(g[go(b, h, 0, c)]));
    }
  }
}

}  // namespace

void class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a,
                     const Tensor& y) {
  const HeadShape sh = head_shape(k);
  if (sh.B * sh.H == 0) return;
  KernelContext ctx(a);
  dispatch_floating(k.dtype(), "class_attention", [&]<class S, class A>() {
    const Tensor w = std::is_same_v<S, A> ? a : Tensor::empty({sh.B * sh.H * sh.N}, DTypeOf<A>::value, a.device());
    launch("class_attention", class_attention_rows<S, A>, row_blocks(sh.B * sh.H), kRowThreads, 0, ctx.stream,
           q.device_data<S>(), strides4(q), k.device_data<S>(), strides4(k), v.device_data<S>(), strides4(v), sh,
           static_cast<A>(scale), w.device_data<A>(), a.device_data<S>(), y.device_data<S>(), strides4(y));
  });
}

void class_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                              double scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const HeadShape sh = head_shape(k);
  if (sh.B * sh.H == 0) return;
  KernelContext ctx(a);
  dispatch_floating(k.dtype(), "class_attention_backward", [&]<class S, class A>() {
    const Tensor gz = Tensor::empty({sh.B * sh.H * sh.N}, DTypeOf<A>::value, a.device());
    launch("class_attention_backward", class_attention_grads<S, A>, row_blocks(sh.B * sh.H), kRowThreads, 0, ctx.stream,
           g.device_data<S>(), strides4(g), q.device_data<S>(), strides4(q), k.device_data<S>(), strides4(k),
           v.device_data<S>(), strides4(v), a.device_data<S>(), sh, static_cast<A>(scale), gz.device_data<A>(),
           device_ptr_or_null<S>(gq), strides4(gq), device_ptr_or_null<S>(gk), strides4(gk), device_ptr_or_null<S>(gv),
           strides4(gv));
  });
}

}  // namespace tessera::cuda
