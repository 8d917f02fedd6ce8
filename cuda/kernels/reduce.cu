// CUDA kernels of the reduction family (semantics as ops/cpu/reduce.cpp). Three shapes of work:
//   - reducing one run of dims of a contiguous tensor followed by kept dims, [outer, rows, cols]
//     over the rows (the bias gradient: a sum over batch and tokens, outer 1; XCA's norms over the
//     tokens of [B, N, h·d]), is a column reduction, in chunks of rows whose partials are then
//     combined, so neighbouring threads read neighbouring addresses and the whole GPU works (a few
//     rows, as a sum over the batch, in one pass), and no transposed copy is made;
//   - a contiguous tensor whose kept dims are one run [outer, kept, inner] with few kept values
//     (talking heads' bias gradient: a sum over [B, h, N²] to h values) is split across many blocks
//     in place, no copy (cuda/middle_sums.h);
//   - anything else is made a row reduction: the reduced dims are permuted last and made
//     contiguous on the device, then one block reduces each row (cuda/block_reduce.h), or, for few
//     rows, the split reduction over the copy.
// Both add in an order fixed by the shapes alone, so results are reproducible. bfloat16 and
// float16 (the gradients of mixed-precision GEMMs) are summed in float32.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <type_traits>

#include "tessera/core/levers.h"
#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/middle_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/reduce.h"

namespace tessera::cuda {

namespace {

template <class T>
__device__ T identity_of(ReduceOp op) {
  return op == ReduceOp::Sum ? T(0) : -std::numeric_limits<T>::infinity();
}

// The column reduction in two stages, like cuda/column_sums.h: stage 1 gives each thread one column
// of one chunk of `chunk_rows` rows (neighbouring threads, neighbouring columns) and writes the
// chunk's partial in double; stage 2 combines a column's chunks in order. With one thread per column
// walking every row, the bias gradient of a linear layer (384-1536 columns over ~25k rows) kept
// a few blocks busy for milliseconds; in chunks it fills the GPU. The chunk size depends on the shape
// alone (so do the results): 64 rows, or about √rows when that is more, so neither stage walks
// more than about √rows values.
inline int64_t column_chunk_rows(int64_t rows) {
  int64_t chunk = kChunkRows;
  while (chunk * chunk < rows) chunk *= 2;
  return chunk;
}

// The columns of x as [outer, rows, cols]: column j (< outer·cols) is column j % cols of block j / cols.
// op over rows [begin, end) of column j, in order, in double.
template <class S, class A>
__device__ double column_op(ReduceOp op, const S* x, int64_t begin, int64_t end, int64_t rows, int64_t cols,
                            int64_t j) {
  const int64_t o = j / cols;
  const S* block = x + o * rows * cols + (j - o * cols);
  double acc = identity_of<double>(op);
  for (int64_t r = begin; r < end; ++r) {
    const double v = static_cast<double>(convert::convert<S, A>(block[r * cols]));
    acc = op == ReduceOp::Sum ? acc + v : (v > acc ? v : acc);
  }
  return acc;
}

// partial[k·columns + j] = op over chunk k of column j (columns = outer·cols).
template <class S, class A>
__global__ void reduce_column_chunks(ReduceOp op, const S* x, int64_t rows, int64_t cols, int64_t columns,
                                     int64_t chunk_rows, int64_t chunks, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * columns) {
    const int64_t k = i / columns, j = i - k * columns;
    partial[i] = column_op<S, A>(op, x, k * chunk_rows, std::min(rows, (k + 1) * chunk_rows), rows, cols, j);
  }
}

// Columns of at most kSinglePassRows rows: out[c] = op over the rows, in order, in double. Up to a
// few hundred rows a second launch costs more than the walk; the bound is not reached by a linear
// layer's bias gradient (batch × tokens rows), so the profile of a small batch (bench/roofline.py)
// takes the same paths as a training batch of 128.
constexpr int64_t kSinglePassRows = 256;

template <class S, class A>
__global__ void reduce_columns(ReduceOp op, const S* x, int64_t rows, int64_t cols, int64_t columns, S* out) {
  TS_GRID_STRIDE_LOOP(j, columns) {
    out[j] = convert::convert<A, S>(static_cast<A>(column_op<S, A>(op, x, 0, rows, rows, cols, j)));
  }
}

// out[c] = op over k of partial[k·cols + c].
template <class S, class A>
__global__ void combine_column_chunks(ReduceOp op, const double* partial, int64_t chunks, int64_t cols, S* out) {
  TS_GRID_STRIDE_LOOP(c, cols) {
    double acc = identity_of<double>(op);
    for (int64_t k = 0; k < chunks; ++k) {
      const double v = partial[k * cols + c];
      acc = op == ReduceOp::Sum ? acc + v : (v > acc ? v : acc);
    }
    out[c] = convert::convert<A, S>(static_cast<A>(acc));
  }
}

// out[row] = op over the `inner` contiguous values of the row; one block per row (grid-strided).
template <class S, class A>
__global__ void reduce_rows(ReduceOp op, const S* x, int64_t outer, int64_t inner, S* out) {
  TS_SHARED(A, scratch, 32);
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const S* p = x + row * inner;
    A acc = identity_of<A>(op);
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
      const A v = convert::convert<S, A>(p[i]);
      acc = op == ReduceOp::Sum ? acc + v : (v > acc ? v : acc);
    }
    const A total = op == ReduceOp::Sum ? block_all_reduce(acc, scratch, SumOp{}, A(0))
                                        : block_all_reduce(acc, scratch, MaxOp{}, identity_of<A>(op));
    if (threadIdx.x == 0) out[row] = convert::convert<A, S>(total);
  }
}

// Warp shuffles move 32- and 64-bit values; a bool travels as an int.
template <class T>
__device__ T shuffle_xor(T v, int offset) {
  if constexpr (std::is_same_v<T, bool>) return __shfl_xor_sync(0xffffffffu, static_cast<int>(v), offset) != 0;
  else return __shfl_xor_sync(0xffffffffu, v, offset);
}

// out[row] = index of the first maximum of the row.
template <class T>
__global__ void argmax_rows(const T* x, int64_t outer, int64_t inner, int64_t* out) {
  TS_SHARED(T, best_values, 32);
  TS_SHARED(int64_t, best_indices, 32);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const T* p = x + row * inner;
    // Each thread keeps the first maximum of its strided share, then pairs are merged keeping the
    // larger value and, between equals, the smaller index: the first maximum overall.
    T best = p[0];
    int64_t index = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      if (p[i] > best) best = p[i], index = i;
    auto better = [](T v, int64_t i, T w, int64_t j) { return w > v || (w == v && j < i); };
    for (int offset = 16; offset > 0; offset /= 2) {
      const T w = shuffle_xor(best, offset);
      const int64_t j = shuffle_xor(index, offset);
      if (better(best, index, w, j)) best = w, index = j;
    }
    __syncthreads();
    if (lane == 0) best_values[warp] = best, best_indices[warp] = index;
    __syncthreads();
    if (warp == 0) {
      best = lane < warps ? best_values[lane] : best_values[0];
      index = lane < warps ? best_indices[lane] : best_indices[0];
      for (int offset = 16; offset > 0; offset /= 2) {
        const T w = shuffle_xor(best, offset);
        const int64_t j = shuffle_xor(index, offset);
        if (better(best, index, w, j)) best = w, index = j;
      }
      if (lane == 0) out[row] = index;
    }
  }
}

// The split reduction is for few outputs of many values each: fewer outputs than fill a GPU with
// one block each (an H100 has 132 SMs), each of at least a chunk's worth of values. A row of a few
// hundred values (XCA's norms over the tokens) is one block's work; splitting it would only add a
// launch. Both bounds hold across batch sizes for the models' reductions (talking heads' bias
// gradient: h outputs of B·N² values), so a small batch's profile takes a training batch's paths.
constexpr int64_t kManyRows = 1024;
bool split_worth_it(int64_t outputs, int64_t per_output) {
  return levers().split_reductions && outputs < kManyRows && per_output >= kMinChunk;
}

// x (contiguous) as three parts [first, middle, last] when the dims that are `reduced_in_middle`
// (reduced, or kept) form one run of consecutive dims and the others lie before and after it
// (size-1 dims count as either): the parts' sizes, or none.
std::optional<std::array<int64_t, 3>> one_run(const Tensor& x, const Shape& dims, bool reduced_in_middle) {
  const auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  std::array<int64_t, 3> sizes{1, 1, 1};
  int part = 0;  // 0: before the run, 1: in it, 2: after it
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t n = x.size(d);
    if (n == 1) continue;
    const int want = reduced(d) == reduced_in_middle ? 1 : (part == 0 ? 0 : 2);
    if (want < part) return std::nullopt;  // a second run
    part = want;
    sizes[static_cast<size_t>(part)] *= n;
  }
  return sizes;
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const Shape& dims, const Tensor& out) {
  const int64_t cols = out.numel();
  if (cols == 0) return;
  KernelContext ctx(out);
  // The split reduction (cuda/middle_sums.h) over [outer, kept, inner] of a contiguous tensor.
  const auto split = [&]<class S>(const Tensor& t, const std::array<int64_t, 3>& s) {
    const Tensor partial = Tensor::empty({s[1] * middle_chunks(s[0], s[2])}, DType::Float64, t.device());
    double* p = partial.device_data<double>();
    if (op == ReduceOp::Sum)
      launch_middle_reduction(ctx.stream, t.device_data<S>(), s[0], s[1], s[2], SumOp{}, 0.0, p, out.device_data<S>());
    else
      launch_middle_reduction(ctx.stream, t.device_data<S>(), s[0], s[1], s[2], MaxOp{},
                              -std::numeric_limits<double>::infinity(), p, out.device_data<S>());
  };
  dispatch_floating(x.dtype(), "reduce", [&]<class S, class A>() {
    // [outer, rows, cols] over the rows, with columns to walk (cols > 1).
    const auto columns = x.is_contiguous() ? one_run(x, dims, true) : std::nullopt;
    if (columns && (*columns)[2] > 1) {
      const int64_t rows = (*columns)[1], width = (*columns)[2];
      if (rows <= kSinglePassRows) {
        // A few rows (a batch dim, the tokens): one thread per column walks them, in one launch.
        launch("reduce_columns", reduce_columns<S, A>, blocks_for(cols), kBlockThreads, 0, ctx.stream, op,
               x.device_data<S>(), rows, width, cols, out.device_data<S>());
        return;
      }
      const int64_t chunk_rows = column_chunk_rows(rows);
      const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
      const Tensor partial = Tensor::empty({chunks * cols}, DType::Float64, x.device());
      launch("reduce_column_chunks", reduce_column_chunks<S, A>, blocks_for(chunks * cols), kBlockThreads, 0,
             ctx.stream, op, x.device_data<S>(), rows, width, cols, chunk_rows, chunks, partial.device_data<double>());
      launch("combine_column_chunks", combine_column_chunks<S, A>, blocks_for(cols), kBlockThreads, 0, ctx.stream, op,
             partial.device_data<double>(), chunks, cols, out.device_data<S>());
      return;
    }
    const int64_t per_output = x.numel() / cols;
    if (split_worth_it(cols, per_output) && x.is_contiguous())
      if (const auto run = one_run(x, dims, false)) return split.template operator()<S>(x, *run);
    const Tensor xt = with_dims_last(x, dims);
    if (split_worth_it(cols, per_output)) return split.template operator()<S>(xt, {1, cols, per_output});
    launch("reduce_rows", reduce_rows<S, A>, row_blocks(cols), kRowThreads, 0, ctx.stream, op, xt.device_data<S>(),
           cols, xt.numel() / cols, out.device_data<S>());
  });
}

void argmax(const Tensor& x, int64_t dim, const Tensor& out) {
  const int64_t outer = out.numel();
  if (outer == 0) return;
  KernelContext ctx(out);
  const Tensor xt = with_dims_last(x, {dim});
  TS_DISPATCH_ALL(x.dtype(), "argmax", [&] {
    launch("argmax_rows", argmax_rows<scalar_t>, row_blocks(outer), kRowThreads, 0, ctx.stream,
           xt.device_data<scalar_t>(), outer, x.shape()[dim], out.device_data<int64_t>());
  });
}

}  // namespace tessera::cuda
