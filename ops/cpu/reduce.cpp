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

// Reduction over the leading dims of a contiguous tensor, viewed as [rows, cols]: accumulate
// whole rows into the output, vectorised along the columns and split across threads by column
// blocks. This is the bias gradient of every linear layer (sum over batch and tokens), which
// would otherwise go through a transposed copy.
template <class T>
void reduce_leading(ReduceOp op, const T* src, int64_t rows, int64_t cols, T* dst) {
  parallel_for(0, cols, std::max<int64_t>(16, 32768 / std::max<int64_t>(rows, 1)), [&](int64_t c0, int64_t c1) {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> acc(dst + c0, c1 - c0);
    if (op == ReduceOp::Sum) acc.setZero();
    else acc.setConstant(-std::numeric_limits<T>::infinity());
    for (int64_t r = 0; r < rows; ++r) {
      Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> row(src + r * cols + c0, c1 - c0);
      if (op == ReduceOp::Sum) acc += row;
      else acc = acc.max(row);
    }
  });
}

}  // namespace

namespace cpu {

void reduce(ReduceOp op, const Tensor& x, const Shape& dims, const Tensor& out) {
  if (x.is_contiguous() && reduces_leading_dims(dims) && static_cast<int64_t>(dims.size()) < x.dim()) {
    const int64_t cols = out.numel(), rows = cols ? x.numel() / cols : 0;
    TS_DISPATCH_FLOAT(x.dtype(), "reduce", [&] {
      reduce_leading<scalar_t>(op, x.data<scalar_t>(), rows, cols, out.data<scalar_t>());
    });
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
