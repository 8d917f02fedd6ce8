// CPU reductions: the reduced dims are moved last and made contiguous, so every output element is
// the reduction of one contiguous run, done with Eigen's vectorised sum/max.
#include <algorithm>
#include <limits>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/kernels/reduce.h"

namespace tessera {

namespace {

// Reduction over consecutive dims of a contiguous tensor that keeps its last dim, viewed as
// [outer, rows, cols] with the middle reduced: accumulate whole rows into the output, vectorised
// along the columns and split across threads by (outer, column block). With outer = 1 this is the
// bias gradient of every linear layer (sum over batch and tokens); with outer > 1, a sum over the
// tokens of [B, N, C] (XCA's norms over the tokens). Either would otherwise go through a
// transposed copy.
template <class T>
void reduce_rows(ReduceOp op, const T* src, int64_t outer, int64_t rows, int64_t cols, T* dst) {
  const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(rows, 1));
  parallel_for(0, outer * cols, grain, [&](int64_t u0, int64_t u1) {
    while (u0 < u1) {  // one segment of columns of one outer index at a time
      const int64_t o = u0 / cols, c0 = u0 % cols, c1 = std::min(cols, c0 + (u1 - u0));
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> acc(dst + o * cols + c0, c1 - c0);
      if (op == ReduceOp::Sum) acc.setZero();
      else acc.setConstant(-std::numeric_limits<T>::infinity());
      const T* block = src + o * rows * cols;
      for (int64_t r = 0; r < rows; ++r) {
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> row(block + r * cols + c0, c1 - c0);
        if (op == ReduceOp::Sum) acc += row;
        else acc = acc.max(row);
      }
      u0 += c1 - c0;
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
    TS_DISPATCH_FLOAT(x.dtype(), "reduce",
                      [&] { reduce_rows<scalar_t>(op, x.data<scalar_t>(), outer, rows, cols, out.data<scalar_t>()); });
    return;
  }
  Tensor xt = with_dims_last(x, dims);
  int64_t inner = 1;
  for (int64_t d : dims) inner *= x.shape()[d];
  const int64_t outer = out.numel();
  TS_DISPATCH_FLOAT(x.dtype(), "reduce", [&] {
    const scalar_t* src = xt.data<scalar_t>();
    scalar_t* dst = out.data<scalar_t>();
    parallel_for(0, outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        Eigen::Map<const Eigen::Array<scalar_t, Eigen::Dynamic, 1>> row(src + i * inner, inner);
        if (op == ReduceOp::Sum) dst[i] = inner ? row.sum() : scalar_t(0);
        else dst[i] = inner ? row.maxCoeff() : -std::numeric_limits<scalar_t>::infinity();
      }
    });
  });
}

void argmax(const Tensor& x, int64_t dim, const Tensor& out) {
  Tensor xt = with_dims_last(x, {dim});
  const int64_t inner = x.shape()[dim], outer = out.numel();
  TS_DISPATCH_ALL(x.dtype(), "argmax", [&] {
    const scalar_t* src = xt.data<scalar_t>();
    int64_t* dst = out.data<int64_t>();
    parallel_for(0, outer, 1024, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const scalar_t* row = src + i * inner;
        int64_t best = 0;
        for (int64_t j = 1; j < inner; ++j)
          if (row[j] > row[best]) best = j;
        dst[i] = best;
      }
    });
  });
}

}  // namespace cpu

}  // namespace tessera
