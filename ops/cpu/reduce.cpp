// CPU reductions: the reduced dims are moved last and made contiguous, so every output element is
// the reduction of one contiguous run, done with Eigen's vectorised sum/max. bfloat16 values are
// summed in float32 (converted a run at a time, ops/cpu/storage.h) and each result rounded once.
#include <algorithm>
#include <limits>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/reduce.h"

namespace tessera {

namespace {

using cpu::compute_t;
using cpu::RunIn;
using cpu::RunOut;

// Reduction over consecutive dims of a contiguous tensor that keeps its last dim, viewed as
// [outer, rows, cols] with the middle reduced: accumulate whole rows into the output, vectorised
// along the columns and split across threads by (outer, column block). With outer = 1 this is the
// bias gradient of every linear layer (sum over batch and tokens); with outer > 1, a sum over the
// tokens of [B, N, C] (XCA's norms over the tokens). Either would otherwise go through a
// transposed copy. (A stored bfloat16 segment accumulates in a float32 buffer, stored once.)
template <class S>
void reduce_rows(ReduceOp op, const S* src, int64_t outer, int64_t rows, int64_t cols, S* dst) {
  using T = compute_t<S>;
  const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(rows, 1));
  parallel_for(0, outer * cols, grain, [&](int64_t u0, int64_t u1) {
    RunIn<S> in;
    RunOut<S> out;
    while (u0 < u1) {  // one segment of columns of one outer index at a time
      const int64_t o = u0 / cols, c0 = u0 % cols, c1 = std::min(cols, c0 + (u1 - u0)), w = c1 - c0;
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> acc(out(dst + o * cols + c0, w), w);
      if (op == ReduceOp::Sum) acc.setZero();
      else acc.setConstant(-std::numeric_limits<T>::infinity());
      const S* block = src + o * rows * cols;
      for (int64_t r = 0; r < rows; ++r) {
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> row(in(block + r * cols + c0, w), w);
        if (op == ReduceOp::Sum) acc += row;
        else acc = acc.max(row);
      }
      out.done();
      u0 += w;
    }
  });
}

// Whether `dims` (sorted) are consecutive and leave the last dim: then [outer, rows, cols] below.
bool reduces_a_middle_block(const Shape& dims, int64_t ndim) {
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return false;
  return !dims.empty() && dims.back() < ndim - 1;
}

}  // namespace

namespace cpu {

void reduce(ReduceOp op, const Tensor& x, const Shape& dims, const Tensor& out) {
  if (x.is_contiguous() && reduces_a_middle_block(dims, x.dim())) {
    int64_t outer = 1, rows = 1, cols = 1;
    for (int64_t d = 0; d < x.dim(); ++d) (d < dims.front() ? outer : d <= dims.back() ? rows : cols) *= x.size(d);
    TS_DISPATCH_STORED(x.dtype(), "reduce", [&] {
      reduce_rows<storage_t>(op, x.data<storage_t>(), outer, rows, cols, out.data<storage_t>());
    });
    return;
  }
  Tensor xt = with_dims_last(x, dims);
  int64_t inner = 1;
  for (int64_t d : dims) inner *= x.shape()[d];
  const int64_t outer = out.numel();
  TS_DISPATCH_STORED(x.dtype(), "reduce", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S* src = xt.data<S>();
    S* dst = out.data<S>();
    parallel_for(0, outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
      RunIn<S> in;
      for (int64_t i = b; i < e; ++i) {
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> row(in(src + i * inner, inner), inner);
        const T r = op == ReduceOp::Sum ? (inner ? row.sum() : T(0))
                                        : (inner ? row.maxCoeff() : -std::numeric_limits<T>::infinity());
        dst[i] = cpu::stored<S>(r);
      }
    });
  });
}

void argmax(const Tensor& x, int64_t dim, const Tensor& out) {
  Tensor xt = with_dims_last(x, {dim});
  const int64_t inner = x.shape()[dim], outer = out.numel();
  TS_DISPATCH_STORED_ALL(x.dtype(), "argmax", [&] {
    using S = storage_t;
    const S* src = xt.data<S>();
    int64_t* dst = out.data<int64_t>();
    parallel_for(0, outer, 1024, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const S* row = src + i * inner;
        int64_t best = 0;
        for (int64_t j = 1; j < inner; ++j)
          if (cpu::value(row[j]) > cpu::value(row[best])) best = j;
        dst[i] = best;
      }
    });
  });
}

}  // namespace cpu

}  // namespace tessera
