// CUDA kernels of factor_attention (ops/kernels/factor_attention.h; formulas as
// ops/cpu/factor_attention.cpp): a block per (sample, head), which reads its q, k and v where the
// qkv projection holds them and writes its output (or q's, k's and v's gradients) straight into
// token layout. The tokens pass through shared memory a tile at a time, so a block reads each
// token's rows once per pass, whatever d:
//   - the d×d products over the tokens (the context softmax(k)ᵀ·v forward, its gradient scale·qᵀ·g
//     backward) keep each entry in one thread's registers across the tiles, a chunk of up to
//     kChunk × kChunk entries per pass over the tokens: one pass at every CoaT's d (8 to 64). The
//     softmax of k over the tokens (CoaT Eq. 3) is online: each tile raises its columns' maxima and
//     rescales what was summed so far (cuda/normaliser.h's idea), so k and v are read once in all,
//     and the columns' log-sum-exps come out at the end for the backward;
//   - the products per token (q·context forward; g·contextᵀ, p·gctx and v·gctxᵀ backward) read a
//     tile's rows from shared memory, p = exp(k − lse) taken once per element as the tile is loaded,
//     and the d×d matrices from global memory, where the block wrote them (cached).
// Every sum runs in a fixed order, no atomics; bfloat16 and float16 compute in float32.
#include <limits>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/factor_attention.h"

namespace tessera::cuda {

namespace {

// Blocks of kThreads threads (the chunks' and tiles' shares below assume it).
constexpr int64_t kThreads = kRowThreads;
// The d×d products are summed a chunk of kChunk × kChunk entries per pass over the tokens, each
// thread holding kEntries of them in registers.
constexpr int64_t kChunk = 64;
constexpr int kEntries = static_cast<int>(kChunk * kChunk / kThreads);
// A tile holds kTileValues values of each operand it reads: tile_tokens(d) tokens of up to kChunk
// channels; of a tile's outputs per (token, channel), each thread computes up to kOutputs.
constexpr int64_t kTileValues = 1024;
constexpr int kOutputs = static_cast<int>(kTileValues / kThreads);
__device__ __forceinline__ int64_t tile_tokens(int64_t d) { return kTileValues / dm::min(d, kChunk); }
// A kernel's shared memory: its tiles, then the softmax's statistics (a chunk's column maxima, sums
// and rescaling factors) and the token groups' partial sums (token_products).
constexpr int64_t shared_values(int64_t tiles) { return tiles * kTileValues + 3 * kChunk + kThreads; }

struct Identity {
  template <class A>
  __device__ A operator()(A v, int64_t) const {
    return v;
  }
};

// tile[t·cols + c] = f(x[b, h, n0 + t, c0 + c], c0 + c) for t < rows, c < cols: consecutive threads
// read consecutive channels of a token's row.
template <class S, class A, class F = Identity>
__device__ void load_tile(A* tile, const S* x, Strides4 xo, int64_t b, int64_t h, int64_t n0, int64_t rows, int64_t c0,
                          int64_t cols, F f = {}) {
  for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
    const int64_t t = e / cols, c = c0 + e % cols;
    tile[e] = f(convert::convert<S, A>(x[xo(b, h, n0 + t, c)]), c);
  }
}

// out(i, j, Σ_n a[n, i]·y[n, j]) for every entry of (b, h)'s d×d product over its N tokens, a chunk
// of at most kChunk × kChunk entries per pass over the tokens, which pass through shared memory a
// tile at a time. Each entry is summed in one thread's registers, the tokens in order; where a chunk
// has fewer entries than the block has threads, groups of threads take every groups-th token of a
// tile, and their sums are added in group order at the end. With kSoftmax a is the softmax of x over
// the tokens, column by column, made online: each tile raises its columns' maxima, rescales the sums
// so far by exp(old − new) and adds exp(x − new); lse[i] gets column i's log-sum-exp. Without it,
// a = x. `tiles` holds two tiles, `stats` 3·kChunk + kThreads values.
template <bool kSoftmax, class S, class A, class Out>
__device__ void token_products(const S* x, Strides4 xo, const S* y, Strides4 yo, int64_t b, int64_t h, int64_t N,
                               int64_t d, A* tiles, A* stats, A* lse, Out out) {
  A *xt = tiles, *yt = tiles + kTileValues;
  A *top = stats, *sum = top + kChunk, *rescale = sum + kChunk, *partial = rescale + kChunk;
  const int64_t T = tile_tokens(d), lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t i0 = 0; i0 < d; i0 += kChunk)
    for (int64_t j0 = 0; j0 < d; j0 += kChunk) {
      const int64_t rc = dm::min(kChunk, d - i0), cc = dm::min(kChunk, d - j0), entries = rc * cc;
      const int64_t groups = dm::max<int64_t>(1, kThreads / entries), width = kThreads / groups;
      const int64_t group = threadIdx.x / width, u = threadIdx.x % width;
      A acc[kEntries];
      TS_UNROLL
      for (int r = 0; r < kEntries; ++r) acc[r] = 0;
      __syncthreads();  // the previous chunk's readers of the statistics are done
      if constexpr (kSoftmax)
        for (int64_t c = threadIdx.x; c < rc; c += blockDim.x) {
          top[c] = -std::numeric_limits<A>::infinity();
          sum[c] = 0;
        }
      for (int64_t n0 = 0; n0 < N; n0 += T) {
        const int64_t rows = dm::min(T, N - n0);
        __syncthreads();  // the previous tile's readers are done
        load_tile(xt, x, xo, b, h, n0, rows, i0, rc);
        load_tile(yt, y, yo, b, h, n0, rows, j0, cc);
        __syncthreads();
        if constexpr (kSoftmax) {
          for (int64_t c = warp; c < rc; c += warps) {  // the columns' maxima, a warp per column
            A m = -std::numeric_limits<A>::infinity();
            for (int64_t t = lane; t < rows; t += 32) m = dm::max(m, xt[t * rc + c]);
            m = warp_all_reduce(m, MaxOp{});
            if (lane == 0) {
              const A raised = dm::max(top[c], m);
              rescale[c] = dm::exp(top[c] - raised);
              top[c] = raised;
            }
          }
          __syncthreads();
          for (int64_t e = threadIdx.x; e < rows * rc; e += blockDim.x) xt[e] = dm::exp(xt[e] - top[e % rc]);
          __syncthreads();
          for (int64_t c = warp; c < rc; c += warps) {  // the columns' sums, a warp per column
            A s = 0;
            for (int64_t t = lane; t < rows; t += 32) s += xt[t * rc + c];
            s = warp_all_reduce(s, SumOp{});
            if (lane == 0) sum[c] = sum[c] * rescale[c] + s;
          }
        }
        if (group < groups) {
          TS_UNROLL
          for (int r = 0; r < kEntries; ++r) {
            const int64_t e = u + r * width, i = e / cc, j = e % cc;
            if (e >= entries) continue;
            A s = acc[r];
            if constexpr (kSoftmax) s *= rescale[i];
            for (int64_t t = group; t < rows; t += groups) s += xt[t * rc + i] * yt[t * cc + j];
            acc[r] = s;
          }
        }
      }
      __syncthreads();  // the columns' statistics are final
      auto finish = [&](int64_t e, A total) {
        const int64_t i = e / cc;
        if constexpr (kSoftmax) total /= sum[i];
        out(i0 + i, j0 + e % cc, total);
      };
      if (groups > 1) {  // a chunk of at most width entries: one per thread of each group
        if (group < groups && u < entries) partial[group * entries + u] = acc[0];
        __syncthreads();
        for (int64_t e = threadIdx.x; e < entries; e += blockDim.x) {
          A total = 0;
          for (int64_t g = 0; g < groups; ++g) total += partial[g * entries + e];
          finish(e, total);
        }
      } else {
        TS_UNROLL
        for (int r = 0; r < kEntries; ++r)
          if (u + r * width < entries) finish(u + r * width, acc[r]);
      }
      if constexpr (kSoftmax)
        if (j0 == 0)
          for (int64_t c = threadIdx.x; c < rc; c += blockDim.x) lse[i0 + c] = top[c] + dm::log(sum[c]);
    }
}

// For each of (b, h)'s tokens n and channels c, write(sums, n, c) with sums[m] = Σ_j over the d
// channels j of add's M products: the tokens a tile at a time, the channels c a chunk of at most
// kChunk at a time, the channels j likewise: load(n0, rows, j0, js) fills the tiles of tokens
// [n0, n0 + rows) and channels [j0, j0 + js), then add(sums, t, c, j0, js) adds their share to
// the sums of token n0 + t, channel c. Each thread keeps kOutputs outputs' sums in registers.
template <int M, class A, class Load, class Add, class Write>
__device__ void token_tiles(int64_t N, int64_t d, Load load, Add add, Write write) {
  const int64_t T = tile_tokens(d);
  for (int64_t n0 = 0; n0 < N; n0 += T)
    for (int64_t c0 = 0; c0 < d; c0 += kChunk) {
      const int64_t rows = dm::min(T, N - n0), cc = dm::min(kChunk, d - c0);
      A sums[kOutputs][M];
      TS_UNROLL
      for (int o = 0; o < kOutputs; ++o)
        for (int m = 0; m < M; ++m) sums[o][m] = 0;
      for (int64_t j0 = 0; j0 < d; j0 += kChunk) {
        const int64_t js = dm::min(kChunk, d - j0);
        __syncthreads();  // the previous tiles' readers are done
        load(n0, rows, j0, js);
        __syncthreads();
        TS_UNROLL
        for (int o = 0; o < kOutputs; ++o) {
          const int64_t e = threadIdx.x + o * kThreads;
          if (e < rows * cc) add(sums[o], e / cc, c0 + e % cc, j0, js);
        }
      }
      TS_UNROLL
      for (int o = 0; o < kOutputs; ++o) {
        const int64_t e = threadIdx.x + o * kThreads;
        if (e < rows * cc) write(sums[o], n0 + e / cc, c0 + e % cc);
      }
    }
}

// For block r = (b, h): the context softmax(k)ᵀ·v and the columns' lse, then per token
// y[n, c] = scale·Σ_i q[n, i]·context[i, c] + (n ≥ 1 ? q[n, c]·cv[n−1, c] : 0) (Eq. 12).
template <class S, class A>
__global__ void factor_attention_heads(const S* q, Strides4 qo, const S* k, Strides4 ko, const S* v, Strides4 vo,
                                       const S* cv, Strides4 co, HeadShape sh, A scale, S* ctx, A* lse, S* y,
                                       Strides4 yo) {
  TS_SHARED(A, shared, shared_values(2));
  A* stats = shared + 2 * kTileValues;
  const int64_t d = sh.d, N = sh.N;
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    S* cr = ctx + r * d * d;
    token_products<true, S, A>(k, ko, v, vo, b, h, N, d, shared, stats, lse + r * d,
                               [&](int64_t i, int64_t j, A value) { cr[i * d + j] = convert::convert<A, S>(value); });
    // token_tiles' first barrier: the context is whole before the tokens' sums read it.
    token_tiles<1, A>(
        N, d,
        [&](int64_t n0, int64_t rows, int64_t j0, int64_t js) { load_tile(shared, q, qo, b, h, n0, rows, j0, js); },
        [&](A(&s)[1], int64_t t, int64_t c, int64_t j0, int64_t js) {
          for (int64_t j = 0; j < js; ++j) s[0] += shared[t * js + j] * convert::convert<S, A>(cr[(j0 + j) * d + c]);
        },
        [&](A(&s)[1], int64_t n, int64_t c) {
          A out = scale * s[0];
          if (n > 0) out += convert::convert<S, A>(q[qo(b, h, n, c)]) * convert::convert<S, A>(cv[co(b, h, n - 1, c)]);
          y[yo(b, h, n, c)] = convert::convert<A, S>(out);
        });
  }
}

// For block r = (b, h): gctx = scale·qᵀ·g and dot[i] = Σ_c ctx[i, c]·gctx[i, c], then per token
//   gq = scale·g·ctxᵀ + (n ≥ 1 ? g ⊙ cv : 0),  gcv = g ⊙ q,  gv = p·gctx,  gk = p ⊙ (v·gctxᵀ − dot).
// gctx [B·h·d·d] and dot [B·h·d] are scratch in A.
template <class S, class A>
__global__ void factor_attention_grads(const S* g, Strides4 go, const S* q, Strides4 qo, const S* k, Strides4 ko,
                                       const S* v, Strides4 vo, const S* cv, Strides4 co, const S* ctx, const A* lse,
                                       HeadShape sh, A scale, A* gctx, A* dot, S* gq, Strides4 gqo, S* gk, Strides4 gko,
                                       S* gv, Strides4 gvo, S* gcv, Strides4 gco) {
  TS_SHARED(A, shared, shared_values(3));
  A *gt = shared, *pt = gt + kTileValues, *vt = pt + kTileValues;
  const int64_t d = sh.d, N = sh.N;
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    const S* cr = ctx + r * d * d;
    A* gr = gctx + r * d * d;
    const A* lr = lse + r * d;
    token_products<false, S, A>(q, qo, g, go, b, h, N, d, shared, shared + 3 * kTileValues, nullptr,
                                [&](int64_t i, int64_t j, A value) { gr[i * d + j] = scale * value; });
    __syncthreads();  // gctx is whole before the rows' dots read it
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      A acc = 0;
      for (int64_t c = 0; c < d; ++c) acc += convert::convert<S, A>(cr[i * d + c]) * gr[i * d + c];
      dot[r * d + i] = acc;
    }
    // token_tiles' first barrier: every dot is in before the tokens' gradients read them.
    token_tiles<3, A>(
        N, d,
        [&](int64_t n0, int64_t rows, int64_t j0, int64_t js) {
          load_tile(gt, g, go, b, h, n0, rows, j0, js);
          load_tile(pt, k, ko, b, h, n0, rows, j0, js, [lr](A x, int64_t j) { return dm::exp(x - lr[j]); });
          load_tile(vt, v, vo, b, h, n0, rows, j0, js);
        },
        [&](A(&s)[3], int64_t t, int64_t c, int64_t j0, int64_t js) {
          for (int64_t j = 0; j < js; ++j) {
            const int64_t at = t * js + j;
            s[0] += gt[at] * convert::convert<S, A>(cr[c * d + j0 + j]);
            s[1] += pt[at] * gr[(j0 + j) * d + c];
            s[2] += vt[at] * gr[c * d + j0 + j];
          }
        },
        [&](A(&s)[3], int64_t n, int64_t c) {
          A to_q = scale * s[0];
          if (n > 0) {
            const A gn = convert::convert<S, A>(g[go(b, h, n, c)]);
            to_q += gn * convert::convert<S, A>(cv[co(b, h, n - 1, c)]);
            gcv[gco(b, h, n - 1, c)] = convert::convert<A, S>(gn * convert::convert<S, A>(q[qo(b, h, n, c)]));
          }
          const A p = dm::exp(convert::convert<S, A>(k[ko(b, h, n, c)]) - lr[c]);
          gq[gqo(b, h, n, c)] = convert::convert<A, S>(to_q);
          gv[gvo(b, h, n, c)] = convert::convert<A, S>(s[1]);
          gk[gko(b, h, n, c)] = convert::convert<A, S>(p * (s[2] - dot[r * d + c]));
        });
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
