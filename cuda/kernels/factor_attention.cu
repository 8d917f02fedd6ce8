// CUDA kernels of factor_attention (ops/kernels/factor_attention.h; formulas as
// ops/cpu/factor_attention.cpp): a block per (sample, head), which reads its q, k and v where the
// qkv projection holds them and writes its output (or q's, k's and v's gradients) straight into
// token layout. The softmax of k over the tokens (CoaT Eq. 3) is never stored: its column
// statistics come from one online pass (cuda/normaliser.h), a thread per channel, and every later
// step recomputes p = exp(k − lse) where it reads it. The d×d matrices between the token sums (the
// context and its gradient) stay in global memory, where the block that wrote them reads them back
// from cache. Every sum runs in a fixed order; bfloat16 and float16 compute in float32.
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/normaliser.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/factor_attention.h"

namespace tessera::cuda {

namespace {

// For block r = (b, h): lse over the tokens per channel, context[i, j] = Σ_n p[n, i]·v[n, j] (a
// thread per entry, the tokens in order), then per output element
// y[n, c] = scale·Σ_i q[n, i]·context[i, c] + (n ≥ 1 ? q[n, c]·cv[n−1, c] : 0) (Eq. 12).
template <class S, class A>
__global__ void factor_attention_heads(const S* q, Strides4 qo, const S* k, Strides4 ko, const S* v, Strides4 vo,
                                       const S* cv, Strides4 co, HeadShape sh, A scale, S* ctx, A* lse, S* y,
                                       Strides4 yo) {
  const int64_t d = sh.d, N = sh.N;
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      Normaliser<A> col;
      for (int64_t n = 0; n < N; ++n) col.merge(convert::convert<S, A>(k[ko(b, h, n, i)]), A(1));
      lse[r * d + i] = col.m + dm::log(col.s);
    }
    __syncthreads();  // every channel's lse is in before the context's entries read them
    const A* lr = lse + r * d;
    for (int64_t e = threadIdx.x; e < d * d; e += blockDim.x) {
      const int64_t i = e / d, j = e % d;
      A acc = 0;
      for (int64_t n = 0; n < N; ++n)
        acc += dm::exp(convert::convert<S, A>(k[ko(b, h, n, i)]) - lr[i]) * convert::convert<S, A>(v[vo(b, h, n, j)]);
      ctx[r * d * d + e] = convert::convert<A, S>(acc);
    }
    __syncthreads();  // the context is whole before the tokens' sums read it
    const S* cr = ctx + r * d * d;
    for (int64_t e = threadIdx.x; e < N * d; e += blockDim.x) {
      const int64_t n = e / d, c = e % d;
      A acc = 0;
      for (int64_t i = 0; i < d; ++i)
        acc += convert::convert<S, A>(q[qo(b, h, n, i)]) * convert::convert<S, A>(cr[i * d + c]);
      acc *= scale;
      if (n > 0) acc += convert::convert<S, A>(q[qo(b, h, n, c)]) * convert::convert<S, A>(cv[co(b, h, n - 1, c)]);
      y[yo(b, h, n, c)] = convert::convert<A, S>(acc);
    }
  }
}

// For block r = (b, h): gctx = scale·qᵀ·g (a thread per entry, the tokens in order) and
// dot[i] = Σ_c ctx[i, c]·gctx[i, c], then per element of the tokens
//   gq = scale·g·ctxᵀ + (n ≥ 1 ? g ⊙ cv : 0),  gcv = g ⊙ q,  gv = p·gctx,  gk = p ⊙ (v·gctxᵀ − dot).
// gctx [B·h·d·d] and dot [B·h·d] are scratch in A.
template <class S, class A>
__global__ void factor_attention_grads(const S* g, Strides4 go, const S* q, Strides4 qo, const S* k, Strides4 ko,
                                       const S* v, Strides4 vo, const S* cv, Strides4 co, const S* ctx, const A* lse,
                                       HeadShape sh, A scale, A* gctx, A* dot, S* gq, Strides4 gqo, S* gk, Strides4 gko,
                                       S* gv, Strides4 gvo, S* gcv, Strides4 gco) {
  const int64_t d = sh.d, N = sh.N;
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    const S* cr = ctx + r * d * d;
    A* gr = gctx + r * d * d;
    const A* lr = lse + r * d;
    for (int64_t e = threadIdx.x; e < d * d; e += blockDim.x) {
      const int64_t i = e / d, c = e % d;
      A acc = 0;
      for (int64_t n = 0; n < N; ++n)
        acc += convert::convert<S, A>(q[qo(b, h, n, i)]) * convert::convert<S, A>(g[go(b, h, n, c)]);
      gr[e] = acc * scale;
    }
    __syncthreads();  // gctx is whole before the rows' dots read it
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      A acc = 0;
      for (int64_t c = 0; c < d; ++c) acc += convert::convert<S, A>(cr[i * d + c]) * gr[i * d + c];
      dot[r * d + i] = acc;
    }
    __syncthreads();  // every dot is in before the tokens' gradients read them
    for (int64_t e = threadIdx.x; e < N * d; e += blockDim.x) {
      const int64_t n = e / d, c = e % d;
      A to_q = 0, to_v = 0, to_p = 0;
      for (int64_t j = 0; j < d; ++j) {
        to_q += convert::convert<S, A>(g[go(b, h, n, j)]) * convert::convert<S, A>(cr[c * d + j]);
        to_v += dm::exp(convert::convert<S, A>(k[ko(b, h, n, j)]) - lr[j]) * gr[j * d + c];
        to_p += convert::convert<S, A>(v[vo(b, h, n, j)]) * gr[c * d + j];
      }
      to_q *= scale;
      if (n > 0) {
        const A gn = convert::convert<S, A>(g[go(b, h, n, c)]);
        to_q += gn * convert::convert<S, A>(cv[co(b, h, n - 1, c)]);
        gcv[gco(b, h, n - 1, c)] = convert::convert<A, S>(gn * convert::convert<S, A>(q[qo(b, h, n, c)]));
      }
      const A p = dm::exp(convert::convert<S, A>(k[ko(b, h, n, c)]) - lr[c]);
      gq[gqo(b, h, n, c)] = convert::convert<A, S>(to_q);
      gv[gvo(b, h, n, c)] = convert::convert<A, S>(to_v);
      gk[gko(b, h, n, c)] = convert::convert<A, S>(p * (to_p - dot[r * d + c]));
    }
  }
}

}  // namespace

void factor_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cv, double scale,
                      const Tensor& ctx, const Tensor& lse, const Tensor& y) {
  const HeadShape sh = head_shape(q);
  if (sh.B * sh.H * sh.N * sh.d == 0) return;
  KernelContext kc(y);
  dispatch_floating(q.dtype(), "factor_attention", [&]<class S, class A>() {
    launch("factor_attention", factor_attention_heads<S, A>, row_blocks(sh.B * sh.H), kRowThreads, 0, kc.stream,
           q.device_data<S>(), strides4(q), k.device_data<S>(), strides4(k), v.device_data<S>(), strides4(v),
           cv.device_data<S>(), strides4(cv), sh, static_cast<A>(scale), ctx.device_data<S>(), lse.device_data<A>(),
           y.device_data<S>(), strides4(y));
  });
}

void factor_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cv,
                               const Tensor& ctx, const Tensor& lse, double scale, const Tensor& gq, const Tensor& gk,
                               const Tensor& gv, const Tensor& gcv) {
  const HeadShape sh = head_shape(q);
  if (sh.B * sh.H * sh.N * sh.d == 0) return;
  KernelContext kc(gq);
  dispatch_floating(q.dtype(), "factor_attention_backward", [&]<class S, class A>() {
    // gctx then dot, per (sample, head).
    const Tensor scratch = Tensor::empty({sh.B * sh.H * sh.d * (sh.d + 1)}, DTypeOf<A>::value, q.device());
    A* gctx = scratch.device_data<A>();
    launch("factor_attention_backward", factor_attention_grads<S, A>, row_blocks(sh.B * sh.H), kRowThreads, 0,
           kc.stream, g.device_data<S>(), strides4(g), q.device_data<S>(), strides4(q), k.device_data<S>(), strides4(k),
           v.device_data<S>(), strides4(v), cv.device_data<S>(), strides4(cv), ctx.device_data<S>(),
           lse.device_data<A>(), sh, static_cast<A>(scale), gctx, gctx + sh.B * sh.H * sh.d * sh.d, gq.device_data<S>(),
           strides4(gq), gk.device_data<S>(), strides4(gk), gv.device_data<S>(), strides4(gv), gcv.device_data<S>(),
           strides4(gcv));
  });
}

}  // namespace tessera::cuda
