// CPU kernels of the indexing family: gather along a dim and its adjoint scatter-add. Both walk
// the positions p of the index's shape split as [outer, n, inner] around `dim`; every operand's element offset is outer_offset[o] + j·stride(dim) + inner_offset[k], with
// the index value replacing j on the indexed side. Work is split over (outer, block of inner)
// pairs and every task runs the whole dim, so a scatter-add never has two threads writing the
// same element (repeated indices only collide inside one task's serial loop).
#include <algorithm>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/indexing.h"

namespace tessera {

namespace {

// Element offsets, in row-major order, of every multi-index over dims [lo, hi) of `shape` for a
// tensor with `strides` ({0} when the range is empty).
Shape dim_offsets(const Shape& shape, const Shape& strides, int64_t lo, int64_t hi) {
  Shape out{0};
  for (int64_t d = lo; d < hi; ++d) {
    Shape next;
    next.reserve(out.size() * shape[d]);
    for (int64_t base : out)
      for (int64_t i = 0; i < shape[d]; ++i) next.push_back(base + i * strides[d]);
    out = std::move(next);
  }
  return out;
}

// Calls op(indexed[p with dim := index[p]], walked[p]) for every position p of walked's shape.
template <class T, class Op>
void walk_along(const Tensor& walked, const Tensor& indexed, const Tensor& index, int64_t dim, const Op& op) {
  if (walked.numel() == 0) return;
  const Shape& shape = walked.shape();
  const int64_t ndim = walked.dim();
  const Shape w_outer = dim_offsets(shape, walked.strides(), 0, dim);
  const Shape w_inner = dim_offsets(shape, walked.strides(), dim + 1, ndim);
  const Shape x_outer = dim_offsets(shape, indexed.strides(), 0, dim);
  const Shape x_inner = dim_offsets(shape, indexed.strides(), dim + 1, ndim);
  const Shape i_outer = dim_offsets(shape, index.strides(), 0, dim);
  const Shape i_inner = dim_offsets(shape, index.strides(), dim + 1, ndim);
  const int64_t n = shape[dim], outer = static_cast<int64_t>(w_outer.size());
  const int64_t inner = static_cast<int64_t>(w_inner.size());
  const int64_t w_step = walked.stride(dim), x_step = indexed.stride(dim), i_step = index.stride(dim);
  T* w = static_cast<T*>(walked.raw_data());
  T* x = static_cast<T*>(indexed.raw_data());
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());

  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / (n * std::min(inner, kBlock)));
  parallel_for(0, outer * blocks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / blocks, k0 = (t % blocks) * kBlock, k1 = std::min(inner, k0 + kBlock);
      for (int64_t j = 0; j < n; ++j) {
        T* wrow = w + w_outer[o] + j * w_step;
        const int64_t* irow = idx + i_outer[o] + j * i_step;
        T* xbase = x + x_outer[o];
        for (int64_t k = k0; k < k1; ++k) op(xbase[irow[i_inner[k]] * x_step + x_inner[k]], wrow[w_inner[k]]);
      }
    }
  });
}

}  // namespace

namespace cpu {

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  TS_DISPATCH_STORED_ALL(x.dtype(), "gather", [&] {
    using S = storage_t;  // moved, not computed on
    walk_along<S>(out, x, index, dim, [](const S& src, S& dst) { dst = src; });
  });
}

void scatter_add(const Tensor& g, int64_t dim, const Tensor& index, const Tensor& gx) {
  // Each add in the compute type, its sum rounded to the stored type (as the cuda kernel's atomics).
  TS_DISPATCH_STORED(g.dtype(), "scatter_add", [&] {
    using S = storage_t;
    walk_along<S>(g, gx, index, dim, [](S& dst, const S& src) { dst = stored<S>(value(dst) + value(src)); });
  });
}

}  // namespace cpu

}  // namespace tessera
