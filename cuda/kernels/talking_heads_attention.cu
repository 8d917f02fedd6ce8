// CUDA kernels of talking_heads_attention (ops/kernels/talking_heads_attention.h; the gradient's
// formulas are in ops/talking_heads_attention.cpp). No [B, h, N, N] map reaches global memory: a
// block holds all heads' maps of a tile in shared memory (tiles: talking_heads_tiles, sized to what
// a block may use on the device: beyond 48 KB each kernel opts in before its launch), and one
// thread owns a (query, key) pair's h values across the heads, so the two head mixings of CaiT's
// talking heads (§4.3) are per-thread h×h products (in local memory: the arrays are indexed by the
// run-time head count).
//   forward:   a block per (sample, T query rows): scores -> w_l mixing -> softmax per row (a warp
//              each, its log-sum-exp saved) -> w_w mixing, in place, then out = A·v in token layout;
//   backward:  (1) a block per (sample, T query rows) recomputes S and P = exp(L − lse), forms dA, dP,
//              D = rowsum(dP ⊙ P) (saved), dL and dS in place, writes dq and the block's partial
//              sums of the three parameter gradients (double), which a second kernel adds in block
//              order (deterministic, no atomics; cuda/column_sums.h);
//              (2) a block per (sample, K keys) walks all queries K at a time, recomputing each
//              pair's whole column from lse and D alone, and adds dk and dv in shared memory.
// bfloat16 and float16 compute in float32.
#include <algorithm>
#include <limits>
#include <utility>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/talking_heads_attention.h"

namespace tessera::cuda {

namespace {

constexpr int kMaxHeads = static_cast<int>(kTalkingHeadsMaxHeads);

// qkv [B, N, 3·C] with unit stride along the channels (and the upstream gradient [B, N, C] alike).
struct Dims {
  int64_t B, N, C, H, dh;
  int64_t sb, sn;    // qkv's strides along B and N
  int64_t gsb, gsn;  // the upstream gradient's (backward)
};
Dims dims_of(const Tensor& qkv, const Tensor& w_l, const Tensor& g = Tensor()) {
  Dims d{};
  d.B = qkv.size(0);
  d.N = qkv.size(1);
  d.C = qkv.size(2) / 3;
  d.H = w_l.size(0);
  d.dh = d.C / d.H;
  d.sb = qkv.stride(0);
  d.sn = qkv.stride(1);
  if (g.defined()) {
    d.gsb = g.stride(0);
    d.gsn = g.stride(1);
  }
  return d;
}

// The mixings' parameters in shared memory: w_l, w_w [H, H], b_w [H] (a missing b_w as zeros; b_l,
// which the softmax ignores, is no operand), in the gradients' layout.
template <class A>
struct Mixings {
  A *wl, *ww, *bw;
};
constexpr int64_t mixing_values(int64_t H) { return 2 * H * H + H; }

// Copies the parameters into the front of shared memory; the caller syncs before reading them.
template <class A>
__device__ Mixings<A> load_mixings(A* shared, int64_t H, const A* wl, const A* ww, const A* bw) {
  const Mixings<A> m{shared, shared + H * H, shared + 2 * H * H};
  for (int64_t e = threadIdx.x; e < H * H; e += blockDim.x) {
    m.wl[e] = wl[e];
    m.ww[e] = ww[e];
  }
  for (int64_t e = threadIdx.x; e < H; e += blockDim.x) m.bw[e] = bw ? bw[e] : A(0);
  return m;
}

// out[h] = scale·Σ_c a[h·dh + c]·b[h·dh + c] for each head: the scores of one (query, key) pair
// (a = q_i, b = k_j), or dA's (a = dO_i, b = v_j).
template <class S, class A>
__device__ void head_dots(const S* a, const S* b, const Dims& d, A scale, A (&out)[kMaxHeads]) {
  for (int64_t h = 0; h < d.H; ++h) {
    A acc = 0;
    for (int64_t c = h * d.dh; c < (h + 1) * d.dh; ++c)
      acc += convert::convert<S, A>(a[c]) * convert::convert<S, A>(b[c]);
    out[h] = scale * acc;
  }
}
// out[o] = Σ_h w[o, h]·in[h] + bias[o] (no bias: null): a Linear over the heads.
template <class A>
__device__ void mix(const A* w, const A* bias, const A (&in)[kMaxHeads], A (&out)[kMaxHeads], int64_t H) {
  for (int64_t o = 0; o < H; ++o) {
    A acc = bias ? bias[o] : A(0);
    for (int64_t h = 0; h < H; ++h) acc += w[o * H + h] * in[h];
    out[o] = acc;
  }
}
// out[h] = Σ_o w[o, h]·in[o]: the mixing's input gradient.
template <class A>
__device__ void mix_back(const A* w, const A (&in)[kMaxHeads], A (&out)[kMaxHeads], int64_t H) {
  for (int64_t h = 0; h < H; ++h) {
    A acc = 0;
    for (int64_t o = 0; o < H; ++o) acc += w[o * H + h] * in[o];
    out[h] = acc;
  }
}

template <class S>
__device__ const S* token(const S* x, const Dims& d, int64_t b, int64_t n) {
  return x + b * d.sb + n * d.sn;
}
template <class S>
__device__ const S* grad_token(const S* g, const Dims& d, int64_t b, int64_t n) {
  return g + b * d.gsb + n * d.gsn;
}

// A tile's maps in shared memory: row t·H + o holds head o of the tile's query t over the N keys.
template <class A>
__device__ void store_column(A* maps, int64_t t, int64_t j, const A (&v)[kMaxHeads], int64_t H, int64_t N) {
  for (int64_t o = 0; o < H; ++o) maps[(t * H + o) * N + j] = v[o];
}
template <class A>
__device__ void load_column(const A* maps, int64_t t, int64_t j, A (&v)[kMaxHeads], int64_t H, int64_t N) {
  for (int64_t o = 0; o < H; ++o) v[o] = maps[(t * H + o) * N + j];
}

// ---- forward: a block per (sample, T query rows) ------------------------------------------------------

template <class S, class A>
__global__ void talking_heads_forward(const S* x, Dims d, int64_t T, A scale, const A* wl, const A* ww, const A* bw,
                                      S* out, A* lse) {
  TS_DYNAMIC_SHARED(A, shared);
  const int64_t H = d.H, N = d.N, tiles = (N + T - 1) / T;
  const Mixings<A> m = load_mixings(shared, H, wl, ww, bw);
  A* maps = shared + mixing_values(H);  // [T·H, N]
  const int64_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int64_t blk = blockIdx.x; blk < d.B * tiles; blk += gridDim.x) {
    const int64_t b = blk / tiles, i0 = blk % tiles * T, rows = std::min(T, N - i0);
    __syncthreads();  // the parameters are in place; the previous tile's readers are done
    for (int64_t e = threadIdx.x; e < rows * N; e += blockDim.x) {
      const int64_t t = e / N, j = e % N;
      A s[kMaxHeads], l[kMaxHeads];
      head_dots(token(x, d, b, i0 + t), token(x, d, b, j) + d.C, d, scale, s);
      mix<A>(m.wl, nullptr, s, l, H);  // b_l left out: the softmax ignores it
      store_column(maps, t, j, l, H, N);
    }
    __syncthreads();
    for (int64_t r = warp; r < rows * H; r += warps) {  // softmax over the keys, a warp per row
      A* row = maps + r * N;
      A mx = -std::numeric_limits<A>::infinity();
      for (int64_t j = lane; j < N; j += 32) mx = dm::max(mx, row[j]);
      mx = warp_all_reduce(mx, MaxOp{});
      A total = 0;
      for (int64_t j = lane; j < N; j += 32) total += (row[j] = dm::exp(row[j] - mx));
      total = warp_all_reduce(total, SumOp{});
      const A inv = A(1) / total;
      for (int64_t j = lane; j < N; j += 32) row[j] *= inv;
      if (lane == 0) lse[(b * H + r % H) * N + i0 + r / H] = mx + dm::log(total);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * N; e += blockDim.x) {
      const int64_t t = e / N, j = e % N;
      A p[kMaxHeads], a[kMaxHeads];
      load_column(maps, t, j, p, H, N);
      mix(m.ww, m.bw, p, a, H);
      store_column(maps, t, j, a, H, N);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * d.C; e += blockDim.x) {
      const int64_t t = e / d.C, ch = e % d.C;
      const A* weights = maps + (t * H + ch / d.dh) * N;
      A acc = 0;
      for (int64_t j = 0; j < N; ++j) acc += weights[j] * convert::convert<S, A>(token(x, d, b, j)[2 * d.C + ch]);
      out[(b * N + i0 + t) * d.C + ch] = convert::convert<A, S>(acc);
    }
  }
}

// ---- backward pass 1: a block per (sample, T query rows) ----------------------------------------------
// partial[blk·P + k] (P = 2H² + H, the parameters' gradient layout) holds tile blk's share.

template <class S, class A>
__global__ void talking_heads_query_grads(const S* g, const S* x, Dims d, int64_t T, A scale, const A* wl, const A* ww,
                                          const A* bw, const A* lse, A* dsum, S* gx, double* partial) {
  TS_DYNAMIC_SHARED(A, shared);
  const int64_t H = d.H, N = d.N, tiles = (N + T - 1) / T, P = mixing_values(H);
  const Mixings<A> m = load_mixings(shared, H, wl, ww, bw);
  A* X = shared + P;     // P, then dL, then dS  [T·H, N]
  A* Y = X + T * H * N;  // dA, then dP, then S  [T·H, N]
  A* D = Y + T * H * N;  // [T·H]
  const int64_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  // partial[blk·P + offset + k] = Σ over the tile of a[k / H]·b[k % H] for k < H², then of a[k − H²]
  // for H² ≤ k < count: a warp per k (few outputs of many values), its lanes' shares added by shuffles
  // in a fixed order.
  auto partial_sums = [&](int64_t blk, int64_t rows, const A* a, const A* b, int64_t offset, int64_t count) {
    for (int64_t k = warp; k < count; k += warps) {
      const bool product = k < H * H;
      const int64_t first = product ? k / H : k - H * H, second = k % H;
      double acc = 0;
      for (int64_t v = lane; v < rows * N; v += 32) {
        const int64_t t = v / N, j = v - t * N;
        const A value = a[(t * H + first) * N + j];
        acc += static_cast<double>(product ? value * b[(t * H + second) * N + j] : value);
      }
      acc = warp_all_reduce(acc, SumOp{});
      if (lane == 0) partial[blk * P + offset + k] = acc;
    }
  };
  for (int64_t blk = blockIdx.x; blk < d.B * tiles; blk += gridDim.x) {
    const int64_t b = blk / tiles, i0 = blk % tiles * T, rows = std::min(T, N - i0);
    __syncthreads();  // the parameters are in place; the previous tile's readers are done
    for (int64_t e = threadIdx.x; e < rows * N; e += blockDim.x) {
      const int64_t t = e / N, j = e % N, i = i0 + t;
      A s[kMaxHeads], l[kMaxHeads];
      head_dots(token(x, d, b, i), token(x, d, b, j) + d.C, d, scale, s);
      mix<A>(m.wl, nullptr, s, l, H);  // b_l left out: the softmax ignores it
      for (int64_t o = 0; o < H; ++o) l[o] = dm::exp(l[o] - lse[(b * H + o) * N + i]);
      store_column(X, t, j, l, H, N);
      head_dots(grad_token(g, d, b, i), token(x, d, b, j) + 2 * d.C, d, A(1), s);
      store_column(Y, t, j, s, H, N);
    }
    __syncthreads();
    partial_sums(blk, rows, Y, X, H * H, H * H + H);  // dw_w[g, o] = Σ dA_g ⊙ P_o, db_w[g] = Σ dA_g
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * N; e += blockDim.x) {
      const int64_t t = e / N, j = e % N;
      A da[kMaxHeads], dp[kMaxHeads];
      load_column(Y, t, j, da, H, N);
      mix_back(m.ww, da, dp, H);
      store_column(Y, t, j, dp, H, N);
    }
    __syncthreads();
    for (int64_t r = warp; r < rows * H; r += warps) {  // D = rowsum(dP ⊙ P), a warp per row
      A acc = 0;
      for (int64_t j = lane; j < N; j += 32) acc += Y[r * N + j] * X[r * N + j];
      acc = warp_all_reduce(acc, SumOp{});
      if (lane == 0) {
        D[r] = acc;
        dsum[(b * H + r % H) * N + i0 + r / H] = acc;
      }
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * N; e += blockDim.x) {
      const int64_t t = e / N, j = e % N;
      A s[kMaxHeads];
      for (int64_t o = 0; o < H; ++o) {
        const int64_t at = (t * H + o) * N + j;
        X[at] *= Y[at] - D[t * H + o];  // dL = P ⊙ (dP − D)
      }
      head_dots(token(x, d, b, i0 + t), token(x, d, b, j) + d.C, d, scale, s);
      store_column(Y, t, j, s, H, N);
    }
    __syncthreads();
    partial_sums(blk, rows, X, Y, 0, H * H);  // dw_l[o, h] = Σ dL_o ⊙ S_h
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * N; e += blockDim.x) {
      const int64_t t = e / N, j = e % N;
      A dl[kMaxHeads], ds[kMaxHeads];
      load_column(X, t, j, dl, H, N);
      mix_back(m.wl, dl, ds, H);
      store_column(X, t, j, ds, H, N);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * d.C; e += blockDim.x) {  // dq = scale·dS·k
      const int64_t t = e / d.C, ch = e % d.C;
      const A* ds = X + (t * H + ch / d.dh) * N;
      A acc = 0;
      for (int64_t j = 0; j < N; ++j) acc += ds[j] * convert::convert<S, A>(token(x, d, b, j)[d.C + ch]);
      gx[(b * N + i0 + t) * 3 * d.C + ch] = convert::convert<A, S>(scale * acc);
    }
  }
}

// ---- backward pass 2: a block per (sample, K keys), the queries K at a time ----------------------------

template <class S, class A>
__global__ void talking_heads_key_grads(const S* g, const S* x, Dims d, int64_t K, A scale, const A* wl, const A* ww,
                                        const A* bw, const A* lse, const A* dsum, S* gx) {
  TS_DYNAMIC_SHARED(A, shared);
  const int64_t H = d.H, N = d.N, C = d.C, tiles = (N + K - 1) / K;
  const Mixings<A> m = load_mixings(shared, H, wl, ww, bw);
  A* dk = shared + mixing_values(H);  // [K, C], then dv
  A* dv = dk + K * C;
  A* dS = dv + K * C;           // [K queries · H, K keys]
  A* weights = dS + K * H * K;  // A, alike
  for (int64_t blk = blockIdx.x; blk < d.B * tiles; blk += gridDim.x) {
    const int64_t b = blk / tiles, j0 = blk % tiles * K, keys = std::min(K, N - j0);
    // Each thread adds into the same (key, channel) entries throughout, so they need no barrier.
    for (int64_t e = threadIdx.x; e < keys * C; e += blockDim.x) dk[e] = dv[e] = 0;
    for (int64_t i0 = 0; i0 < N; i0 += K) {
      const int64_t rows = std::min(K, N - i0);
      __syncthreads();  // the parameters are in place; the previous step's readers are done
      for (int64_t e = threadIdx.x; e < rows * keys; e += blockDim.x) {
        const int64_t t = e / keys, jj = e % keys, i = i0 + t, j = j0 + jj;
        A s[kMaxHeads], l[kMaxHeads], p[kMaxHeads], a[kMaxHeads];
        head_dots(token(x, d, b, i), token(x, d, b, j) + C, d, scale, s);
        mix<A>(m.wl, nullptr, s, l, H);  // b_l left out: the softmax ignores it
        for (int64_t o = 0; o < H; ++o) p[o] = dm::exp(l[o] - lse[(b * H + o) * N + i]);
        mix(m.ww, m.bw, p, a, H);
        head_dots(grad_token(g, d, b, i), token(x, d, b, j) + 2 * C, d, A(1), s);          // dA
        mix_back(m.ww, s, l, H);                                                           // dP
        for (int64_t o = 0; o < H; ++o) l[o] = p[o] * (l[o] - dsum[(b * H + o) * N + i]);  // dL
        mix_back(m.wl, l, s, H);                                                           // dS
        for (int64_t h = 0; h < H; ++h) {
          dS[(t * H + h) * K + jj] = s[h];
          weights[(t * H + h) * K + jj] = a[h];
        }
      }
      __syncthreads();
      for (int64_t e = threadIdx.x; e < keys * C; e += blockDim.x) {
        const int64_t jj = e / C, ch = e % C, h = ch / d.dh;
        A ak = 0, av = 0;
        for (int64_t t = 0; t < rows; ++t) {
          ak += dS[(t * H + h) * K + jj] * convert::convert<S, A>(token(x, d, b, i0 + t)[ch]);
          av += weights[(t * H + h) * K + jj] * convert::convert<S, A>(grad_token(g, d, b, i0 + t)[ch]);
        }
        dk[e] += ak;
        dv[e] += av;
      }
    }
    for (int64_t e = threadIdx.x; e < keys * C; e += blockDim.x) {
      S* at = gx + (b * N + j0 + e / C) * 3 * C + e % C;
      at[C] = convert::convert<A, S>(scale * dk[e]);
      at[2 * C] = convert::convert<A, S>(dv[e]);
    }
  }
}

// The tiles for these shapes in what a block may use on `device`, which must take them.
TalkingHeadsTiles tiles_of(const Dims& d, int64_t value_bytes, int device, const char* op) {
  const auto shared = static_cast<int64_t>(block_shared_bytes(device));
  TS_CHECK(talking_heads_fit_device(d.H, d.N, d.C, value_bytes, shared), op, ": ", d.H, " heads of ", d.N,
           " tokens do not fit the ", shared,
           " bytes of shared memory a block may use (the front end runs the composition)");
  return talking_heads_tiles(d.H, d.N, d.C, value_bytes, shared);
}

// Launches `kernel` with `shared` bytes of dynamic shared memory, opting in to them first where
// they exceed the 48 KB every kernel has.
template <class... Params, class... Args>
void launch_tile(const char* name, void (*kernel)(Params...), unsigned blocks, size_t shared, cudaStream_t stream,
                 Args&&... args) {
  opt_in_shared_bytes(name, kernel, shared);
  launch(name, kernel, blocks, kRowThreads, shared, stream, std::forward<Args>(args)...);
}

}  // namespace

void talking_heads_attention(const Tensor& qkv, double scale, const Tensor& w_l, const Tensor& w_w, const Tensor& b_w,
                             const Tensor& out, const Tensor& lse) {
  const Dims d = dims_of(qkv, w_l);
  KernelContext ctx(out);
  dispatch_floating(qkv.dtype(), "talking_heads_attention", [&]<class S, class A>() {
    const int64_t T = tiles_of(d, sizeof(A), out.device().index, "talking_heads_attention").rows;
    const int64_t tiles = (d.N + T - 1) / T;
    const size_t shared = sizeof(A) * static_cast<size_t>(mixing_values(d.H) + T * d.H * d.N);
    launch_tile("talking_heads_attention", talking_heads_forward<S, A>, row_blocks(d.B * tiles), shared, ctx.stream,
                qkv.device_data<S>(), d, T, static_cast<A>(scale), w_l.device_data<A>(), w_w.device_data<A>(),
                device_ptr_or_null<A>(b_w), out.device_data<S>(), lse.device_data<A>());
  });
}

void talking_heads_attention_backward(const Tensor& g, const Tensor& qkv, double scale, const Tensor& w_l,
                                      const Tensor& w_w, const Tensor& b_w, const Tensor& lse, const Tensor& gqkv,
                                      const Tensor& gparams) {
  const Dims d = dims_of(qkv, w_l, g);
  KernelContext ctx(gqkv);
  dispatch_floating(qkv.dtype(), "talking_heads_attention_backward", [&]<class S, class A>() {
    const TalkingHeadsTiles tiles = tiles_of(d, sizeof(A), gqkv.device().index, "talking_heads_attention_backward");
    const int64_t T = tiles.grad_rows, row_tiles = (d.N + T - 1) / T, K = tiles.keys, key_tiles = (d.N + K - 1) / K;
    const int64_t P = mixing_values(d.H);
    const Tensor dsum = Tensor::empty({d.B, d.H, d.N}, DTypeOf<A>::value, qkv.device());
    const Tensor partial = Tensor::empty({d.B * row_tiles * P}, DType::Float64, qkv.device());
    const A *wl = w_l.device_data<A>(), *ww = w_w.device_data<A>(), *bw = device_ptr_or_null<A>(b_w);
    launch_tile("talking_heads_attention_backward (queries)", talking_heads_query_grads<S, A>,
                row_blocks(d.B * row_tiles), sizeof(A) * static_cast<size_t>(P + (2 * T * d.N + T) * d.H), ctx.stream,
                g.device_data<S>(), qkv.device_data<S>(), d, T, static_cast<A>(scale), wl, ww, bw, lse.device_data<A>(),
                dsum.device_data<A>(), gqkv.device_data<S>(), partial.device_data<double>());
    launch("talking_heads_attention_backward (parameters)", sum_column_chunks<A>, blocks_for(P), kBlockThreads, 0,
           ctx.stream, partial.device_data<double>(), d.B * row_tiles, P, gparams.device_data<A>());
    launch_tile("talking_heads_attention_backward (keys)", talking_heads_key_grads<S, A>, row_blocks(d.B * key_tiles),
                sizeof(A) * static_cast<size_t>(P + 2 * K * d.C + 2 * K * d.H * K), ctx.stream, g.device_data<S>(),
                qkv.device_data<S>(), d, K, static_cast<A>(scale), wl, ww, bw, lse.device_data<A>(),
                dsum.device_data<A>(), gqkv.device_data<S>());
  });
}

}  // namespace tessera::cuda
