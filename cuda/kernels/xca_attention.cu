// CUDA kernels of xca_attention (ops/kernels/xca_attention.h; formulas as ops/cpu/xca_attention.cpp):
// a block per (sample, head), which reads its q, k and v where the qkv projection holds them and
// writes its output (or q's, k's and v's gradients) straight into token layout. The d×d matrices
// between the token products (s, the map and its gradient) stay in global memory, where the block
// that wrote them reads them back from cache: XCiT's d of 32 to 64 would fit shared memory in float32,
// but not in every dtype and d the op takes. The map's own arithmetic is xca_attention_map's
// (cuda/xca_map.h). Every sum runs in a fixed order; bfloat16 and float16 compute in float32.
#include <type_traits>

#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/xca_map.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/xca_attention.h"

namespace tessera::cuda {

namespace {

// Σ_n x[b, h, n, i]·y[b, h, n, j] over the tokens, in order: an entry of a d×d product over the
// tokens (q·kᵀ, g·vᵀ) or a channel's squared norm.
template <class S, class A>
__device__ A token_dot(const S* x, Strides4 xo, const S* y, Strides4 yo, int64_t b, int64_t h, int64_t N, int64_t i,
                       int64_t j) {
  A acc = 0;
  for (int64_t n = 0; n < N; ++n)
    acc += convert::convert<S, A>(x[xo(b, h, n, i)]) * convert::convert<S, A>(y[yo(b, h, n, j)]);
  return acc;
}

// For block r = (b, h): the norms and s = q·kᵀ, then the map's rows (a thread each), then
// y[n, i] = Σ_j a_ij·v_j[n] from the unrounded weights w (a itself when S computes in itself).
template <class S, class A>
__global__ void xca_attention_heads(const S* q, Strides4 qo, const S* k, Strides4 ko, const S* v, Strides4 vo,
                                    HeadShape sh, const A* t, A eps, S* s, S* nq, S* nk, A* w, S* a, S* y,
                                    Strides4 yo) {
  const int64_t d = sh.d, N = sh.N;
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    for (int64_t c = threadIdx.x; c < 2 * d; c += blockDim.x) {
      const bool is_q = c < d;
      const int64_t ch = is_q ? c : c - d;
      const A squares =
          is_q ? token_dot<S, A>(q, qo, q, qo, b, h, N, ch, ch) : token_dot<S, A>(k, ko, k, ko, b, h, N, ch, ch);
      (is_q ? nq : nk)[r * d + ch] = convert::convert<A, S>(dm::sqrt(squares));
    }
    for (int64_t e = threadIdx.x; e < d * d; e += blockDim.x)
      s[r * d * d + e] = convert::convert<A, S>(token_dot<S, A>(q, qo, k, ko, b, h, N, e / d, e % d));
    __syncthreads();  // the norms and s are whole before the map's rows read them
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) xca_map_row(s, nq, nk, t, eps, d, sh.H, r * d + i, w, a);
    __syncthreads();  // every weight is final before the tokens' sums read them
    const A* wr = w + r * d * d;
    for (int64_t e = threadIdx.x; e < N * d; e += blockDim.x) {
      const int64_t n = e / d, i = e % d;
      A acc = 0;
      for (int64_t j = 0; j < d; ++j) acc += wr[i * d + j] * convert::convert<S, A>(v[vo(b, h, n, j)]);
      y[yo(b, h, n, i)] = convert::convert<A, S>(acc);
    }
  }
}

// For block r = (b, h): ga = g·vᵀ, the map's backward (rows, then columns), then per token
// gq = gs·k + q_coef·q, gk = gsᵀ·q + k_coef·k and gv = aᵀ·g. ga and gs [B·h·d·d] (in S, as the
// composition rounds them), q_coef, k_coef and dots [B·h·d] are scratch.
template <class S, class A>
__global__ void xca_attention_grads(const S* g, Strides4 go, const S* q, Strides4 qo, const S* k, Strides4 ko,
                                    const S* v, Strides4 vo, const S* a, const S* s, const S* nq, const S* nk,
                                    HeadShape sh, const A* t, A eps, S* ga, S* gs, A* q_coef, A* k_coef, A* dots,
                                    A* row_terms, S* gq, Strides4 gqo, S* gk, Strides4 gko, S* gv, Strides4 gvo) {
  const int64_t d = sh.d, N = sh.N;
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    for (int64_t e = threadIdx.x; e < d * d; e += blockDim.x)
      ga[r * d * d + e] = convert::convert<A, S>(token_dot<S, A>(g, go, v, vo, b, h, N, e / d, e % d));
    __syncthreads();  // ga is whole before the map's rows read it
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      xca_map_backward_row(ga, a, s, nq, nk, t, eps, d, sh.H, r * d + i, gs, row_terms, q_coef, dots);
    __syncthreads();  // every row's dot is in before the columns read them
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      xca_map_backward_column(ga, a, s, nq, nk, t, eps, dots, d, sh.H, r * d + j, k_coef);
    __syncthreads();  // gs and both coefficients are whole before the tokens' sums
    const S *gsr = gs + r * d * d, *ar = a + r * d * d;
    for (int64_t e = threadIdx.x; e < N * d; e += blockDim.x) {
      const int64_t n = e / d, c = e % d;
      A to_q = 0, to_k = 0, to_v = 0;
      for (int64_t j = 0; j < d; ++j) {
        to_q += convert::convert<S, A>(gsr[c * d + j]) * convert::convert<S, A>(k[ko(b, h, n, j)]);
        to_k += convert::convert<S, A>(gsr[j * d + c]) * convert::convert<S, A>(q[qo(b, h, n, j)]);
        to_v += convert::convert<S, A>(ar[j * d + c]) * convert::convert<S, A>(g[go(b, h, n, j)]);
      }
      gq[gqo(b, h, n, c)] =
          convert::convert<A, S>(to_q + q_coef[r * d + c] * convert::convert<S, A>(q[qo(b, h, n, c)]));
      gk[gko(b, h, n, c)] =
          convert::convert<A, S>(to_k + k_coef[r * d + c] * convert::convert<S, A>(k[ko(b, h, n, c)]));
      gv[gvo(b, h, n, c)] = convert::convert<A, S>(to_v);
    }
  }
}

}  // namespace

void xca_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& t, double eps, const Tensor& s,
                   const Tensor& nq, const Tensor& nk, const Tensor& a, const Tensor& y) {
  const HeadShape sh = head_shape(q);
  if (sh.B * sh.H * sh.d == 0) return;
  KernelContext ctx(a);
  dispatch_floating(q.dtype(), "xca_attention", [&]<class S, class A>() {
    const Tensor w = std::is_same_v<S, A> ? a : Tensor::empty({a.numel()}, DTypeOf<A>::value, a.device());
    launch("xca_attention", xca_attention_heads<S, A>, row_blocks(sh.B * sh.H), kRowThreads, 0, ctx.stream,
           q.device_data<S>(), strides4(q), k.device_data<S>(), strides4(k), v.device_data<S>(), strides4(v), sh,
           t.device_data<A>(), static_cast<A>(eps), s.device_data<S>(), nq.device_data<S>(), nk.device_data<S>(),
           w.device_data<A>(), a.device_data<S>(), y.device_data<S>(), strides4(y));
  });
}

void xca_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                            const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                            const Tensor& gq, const Tensor& gk, const Tensor& gv, const Tensor& row_terms) {
  const HeadShape sh = head_shape(q);
  if (sh.B * sh.H * sh.d == 0) return;
  KernelContext ctx(a);
  dispatch_floating(q.dtype(), "xca_attention_backward", [&]<class S, class A>() {
    const Tensor ga = Tensor::empty({a.numel()}, a.dtype(), a.device()),
                 gs = Tensor::empty({a.numel()}, a.dtype(), a.device());
    const Tensor coefs = Tensor::empty({3, nq.numel()}, DTypeOf<A>::value, a.device());  // q_coef, k_coef, dots
    A* coef = coefs.device_data<A>();
    launch("xca_attention_backward", xca_attention_grads<S, A>, row_blocks(sh.B * sh.H), kRowThreads, 0, ctx.stream,
           g.device_data<S>(), strides4(g), q.device_data<S>(), strides4(q), k.device_data<S>(), strides4(k),
           v.device_data<S>(), strides4(v), a.device_data<S>(), s.device_data<S>(), nq.device_data<S>(),
           nk.device_data<S>(), sh, t.device_data<A>(), static_cast<A>(eps), ga.device_data<S>(), gs.device_data<S>(),
           coef, coef + nq.numel(), coef + 2 * nq.numel(), row_terms.device_data<A>(), gq.device_data<S>(),
           strides4(gq), gk.device_data<S>(), strides4(gk), gv.device_data<S>(), strides4(gv));
  });
}

}  // namespace tessera::cuda
