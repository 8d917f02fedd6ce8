// CUDA kernels of softmax / log_softmax, forward and backward (formulas in ops/kernels/softmax.h),
// on tensors viewed as [outer, n, inner] around the softmax dim:
//   - inner == 1 and n <= kWarpRowMax (attention rows): a warp per row, the row in registers, the
//     max and the sum by warp shuffles (cuda/warp_rows.h);
//   - inner == 1, longer rows (or TESSERA_WARP_ROWS=0): one block per row, the max and the sum by
//     block reductions;
//   - inner > 1 (e.g. CoaT's softmax of K over tokens, dim 2): a block per tile of neighbouring
//     columns, each column's values split among the block's lanes (below).
// bfloat16 and float16 compute in float32.
#include <algorithm>
#include <limits>

#include "tessera/core/host_device.h"
#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/normaliser.h"
#include "tessera/cuda/warp_rows.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/softmax.h"

namespace tessera::cuda {

namespace {

template <class S, class A>
__global__ void softmax_rows(SoftmaxKind kind, const S* x, int64_t rows, int64_t n, S* y) {
  TS_SHARED(A, scratch, 32);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S* xr = x + row * n;
    S* yr = y + row * n;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = dm::max(m, convert::convert<S, A>(xr[i]));
    m = block_all_reduce(m, scratch, MaxOp{}, -std::numeric_limits<A>::infinity());
    A s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += dm::exp(convert::convert<S, A>(xr[i]) - m);
    s = block_all_reduce(s, scratch, SumOp{}, A(0));
    // The output is written from x again rather than from stored exponentials: a half-precision y
    // would round them before the division.
    if (kind == SoftmaxKind::Softmax) {
      const A inv = A(1) / s;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = convert::convert<A, S>(dm::exp(convert::convert<S, A>(xr[i]) - m) * inv);
    } else {
      const A log_s = dm::log(s);  // (x − m) − log Σ, not x − (m + log Σ): m's rounding would leak in
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = convert::convert<A, S>((convert::convert<S, A>(xr[i]) - m) - log_s);
    }
  }
}

template <class S, class A>
__global__ void softmax_backward_rows(SoftmaxKind kind, const S* y, const S* gy, int64_t rows, int64_t n, S* gx) {
  TS_SHARED(A, scratch, 32);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S* yr = y + row * n;
    const S* gr = gy + row * n;
    A s = 0;  // Σ gy·y (softmax) or Σ gy (log_softmax)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const A g = convert::convert<S, A>(gr[i]);
      s += kind == SoftmaxKind::Softmax ? g * convert::convert<S, A>(yr[i]) : g;
    }
    s = block_all_reduce(s, scratch, SumOp{}, A(0));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const A yv = convert::convert<S, A>(yr[i]), g = convert::convert<S, A>(gr[i]);
      gx[row * n + i] = convert::convert<A, S>(kind == SoftmaxKind::Softmax ? yv * (g - s) : g - dm::exp(yv) * s);
    }
  }
}

template <class S, class A, int P>
__global__ void softmax_warp_rows(SoftmaxKind kind, const S* x, int64_t rows, int64_t n, S* y) {
  constexpr A kMinusInf = -std::numeric_limits<A>::infinity();
  const unsigned lane = threadIdx.x % 32;
  TS_WARP_ROW_LOOP(row, rows) {
    A v[P];
    load_warp_row(x + row * n, n, lane, kMinusInf, v);
    A m = kMinusInf;
    TS_UNROLL
    for (int j = 0; j < P; ++j) m = dm::max(m, v[j]);
    m = warp_all_reduce(m, MaxOp{});
    // v becomes exp(x − m) for softmax, x − m for log_softmax: the register copy is float32 (or
    // double), so keeping the exponentials rounds nothing the block kernel does not.
    A s = 0;
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const A e = v[j] == kMinusInf ? A(0) : dm::exp(v[j] - m);  // the padding adds 0
      s += e;
      v[j] = kind == SoftmaxKind::Softmax ? e : v[j] - m;
    }
    s = warp_all_reduce(s, SumOp{});
    const A inv = A(1) / s, log_s = dm::log(s);
    S* yr = y + row * n;
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const int64_t i = lane + 32 * static_cast<int64_t>(j);
      if (i < n) yr[i] = convert::convert<A, S>(kind == SoftmaxKind::Softmax ? v[j] * inv : v[j] - log_s);
    }
  }
}

template <class S, class A, int P>
__global__ void softmax_backward_warp_rows(SoftmaxKind kind, const S* y, const S* gy, int64_t rows, int64_t n, S* gx) {
  const unsigned lane = threadIdx.x % 32;
  TS_WARP_ROW_LOOP(row, rows) {
    A yv[P], g[P];
    load_warp_row(y + row * n, n, lane, A(0), yv);
    load_warp_row(gy + row * n, n, lane, A(0), g);
    A s = 0;  // Σ gy·y (softmax) or Σ gy (log_softmax); the padding adds 0
    TS_UNROLL
    for (int j = 0; j < P; ++j) s += kind == SoftmaxKind::Softmax ? g[j] * yv[j] : g[j];
    s = warp_all_reduce(s, SumOp{});
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const int64_t i = lane + 32 * static_cast<int64_t>(j);
      if (i >= n) continue;
      gx[row * n + i] =
          convert::convert<A, S>(kind == SoftmaxKind::Softmax ? yv[j] * (g[j] - s) : g[j] - dm::exp(yv[j]) * s);
    }
  }
}

// The column path: a column (o, j) holds x[o·n·inner + k·inner + j] for k < n. A block takes a tile
// of TX neighbouring columns of one o (TX: inner rounded up to a power of two, at most 32, so
// neighbouring threads read neighbouring addresses) and splits each column's n values among
// kBlockThreads / TX lanes; the lanes' partial results are combined by a tree in shared memory, in
// an order fixed by the block shape. The forward keeps an online maximum and a sum rescaled to it
// (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018), so x is read once for
// the normaliser and once for the output. (One thread per column walking all n values three times
// left most of a GPU idle on CoaT's softmax of K over 3137 tokens.)
struct ColumnTiles {
  SoftmaxLayout l;
  int64_t tx = 1, lanes = 1, tiles_per_outer = 1;
  explicit ColumnTiles(const SoftmaxLayout& layout) : l(layout) {
    while (tx < std::min<int64_t>(l.inner, 32)) tx *= 2;
    lanes = kBlockThreads / tx;
    tiles_per_outer = (l.inner + tx - 1) / tx;
  }
  TS_HOST_DEVICE int64_t tiles() const { return l.outer * tiles_per_outer; }
  // Column `x` (< tx) of `tile`: whether it exists (the last tile of an outer may be partial), and
  // the offset of its first value.
  struct Column {
    bool active;
    int64_t base;
  };
  TS_HOST_DEVICE Column column(int64_t tile, int64_t x) const {
    const int64_t o = tile / tiles_per_outer, j = tile % tiles_per_outer * tx + x;
    return {j < l.inner, o * l.n * l.inner + j};
  }
};

template <class S, class A>
__global__ void softmax_columns(SoftmaxKind kind, const S* x, ColumnTiles t, S* y) {
  TS_SHARED(A, ms, kBlockThreads);
  TS_SHARED(A, ss, kBlockThreads);
  const int64_t tx = threadIdx.x % t.tx, lane = threadIdx.x / t.tx;
  for (int64_t tile = blockIdx.x; tile < t.tiles(); tile += gridDim.x) {
    const auto [active, base] = t.column(tile, tx);
    Normaliser<A> part;
    if (active)
      for (int64_t k = lane; k < t.l.n; k += t.lanes) part.merge(convert::convert<S, A>(x[base + k * t.l.inner]), A(1));
    ms[threadIdx.x] = part.m;
    ss[threadIdx.x] = part.s;
    for (int64_t half = t.lanes / 2; half > 0; half /= 2) {
      __syncthreads();
      if (lane < half) {
        Normaliser<A> a{ms[threadIdx.x], ss[threadIdx.x]};
        a.merge(ms[threadIdx.x + half * t.tx], ss[threadIdx.x + half * t.tx]);
        ms[threadIdx.x] = a.m;
        ss[threadIdx.x] = a.s;
      }
    }
    __syncthreads();
    const A m = ms[tx], s = ss[tx];  // lane 0's: the whole column's
    __syncthreads();                 // read before the next tile overwrites
    if (!active) continue;
    if (kind == SoftmaxKind::Softmax) {
      const A inv = A(1) / s;
      for (int64_t k = lane; k < t.l.n; k += t.lanes) {
        const int64_t i = base + k * t.l.inner;
        y[i] = convert::convert<A, S>(dm::exp(convert::convert<S, A>(x[i]) - m) * inv);
      }
    } else {
      const A log_s = dm::log(s);
      for (int64_t k = lane; k < t.l.n; k += t.lanes) {
        const int64_t i = base + k * t.l.inner;
        y[i] = convert::convert<A, S>((convert::convert<S, A>(x[i]) - m) - log_s);
      }
    }
  }
}

template <class S, class A>
__global__ void softmax_backward_columns(SoftmaxKind kind, const S* y, const S* gy, ColumnTiles t, S* gx) {
  TS_SHARED(A, sums, kBlockThreads);
  const int64_t tx = threadIdx.x % t.tx, lane = threadIdx.x / t.tx;
  for (int64_t tile = blockIdx.x; tile < t.tiles(); tile += gridDim.x) {
    const auto [active, base] = t.column(tile, tx);
    A part = 0;  // Σ gy·y (softmax) or Σ gy (log_softmax) over this lane's share
    if (active)
      for (int64_t k = lane; k < t.l.n; k += t.lanes) {
        const int64_t i = base + k * t.l.inner;
        const A g = convert::convert<S, A>(gy[i]);
        part += kind == SoftmaxKind::Softmax ? g * convert::convert<S, A>(y[i]) : g;
      }
    sums[threadIdx.x] = part;
    for (int64_t half = t.lanes / 2; half > 0; half /= 2) {
      __syncthreads();
      if (lane < half) sums[threadIdx.x] += sums[threadIdx.x + half * t.tx];
    }
    __syncthreads();
    const A s = sums[tx];
    __syncthreads();
    if (!active) continue;
    for (int64_t k = lane; k < t.l.n; k += t.lanes) {
      const int64_t i = base + k * t.l.inner;
      const A yv = convert::convert<S, A>(y[i]), g = convert::convert<S, A>(gy[i]);
      gx[i] = convert::convert<A, S>(kind == SoftmaxKind::Softmax ? yv * (g - s) : g - dm::exp(yv) * s);
    }
  }
}

}  // namespace

void softmax(SoftmaxKind kind, const Tensor& x, int64_t dim, const Tensor& y) {
  const SoftmaxLayout l = softmax_layout(x, dim);
  if (x.numel() == 0) return;
  KernelContext ctx(y);
  dispatch_floating(x.dtype(), "softmax", [&]<class S, class A>() {
    if (l.inner == 1 && warp_rows(l.n))
      with_values_per_lane(l.n, [&]<int P>() {
        launch("softmax_warp_rows", softmax_warp_rows<S, A, P>, warp_row_blocks(l.outer), kBlockThreads, 0, ctx.stream,
               kind, x.device_data<S>(), l.outer, l.n, y.device_data<S>());
      });
    else if (l.inner == 1)
      launch("softmax_rows", softmax_rows<S, A>, row_blocks(l.outer), kRowThreads, 0, ctx.stream, kind,
             x.device_data<S>(), l.outer, l.n, y.device_data<S>());
    else
      launch("softmax_columns", softmax_columns<S, A>, row_blocks(ColumnTiles(l).tiles()), kBlockThreads, 0, ctx.stream,
             kind, x.device_data<S>(), ColumnTiles(l), y.device_data<S>());
  });
}

void softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& gy, int64_t dim, const Tensor& gx) {
  const SoftmaxLayout l = softmax_layout(y, dim);
  if (y.numel() == 0) return;
  KernelContext ctx(gx);
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class S, class A>() {
    if (l.inner == 1 && warp_rows(l.n))
      with_values_per_lane(l.n, [&]<int P>() {
        launch("softmax_backward_warp_rows", softmax_backward_warp_rows<S, A, P>, warp_row_blocks(l.outer),
               kBlockThreads, 0, ctx.stream, kind, y.device_data<S>(), gy.device_data<S>(), l.outer, l.n,
               gx.device_data<S>());
      });
    else if (l.inner == 1)
      launch("softmax_backward_rows", softmax_backward_rows<S, A>, row_blocks(l.outer), kRowThreads, 0, ctx.stream,
             kind, y.device_data<S>(), gy.device_data<S>(), l.outer, l.n, gx.device_data<S>());
    else
      launch("softmax_backward_columns", softmax_backward_columns<S, A>, row_blocks(ColumnTiles(l).tiles()),
             kBlockThreads, 0, ctx.stream, kind, y.device_data<S>(), gy.device_data<S>(), ColumnTiles(l),
             gx.device_data<S>());
  });
}

}  // namespace tessera::cuda
