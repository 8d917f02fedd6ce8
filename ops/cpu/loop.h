// The CPU elementwise engine (internal): walks N same-shaped operands with arbitrary strides.
// Dimensions that are contiguous in every operand are merged (ops/kernels/strided.h), so the common
// cases (contiguous, broadcast of a row or a scalar) become one long inner loop. The callback gets one inner row at
// a time: base pointers and per-operand inner strides (in elements).
#pragma once
#include <array>

#include "tessera/core/parallel.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strided.h"

namespace tessera::cpu {

template <size_t N>
struct StridedPlan {
  Shape sizes;                   // merged dims, outermost first; sizes.back() is the row
  std::array<Shape, N> strides;  // element strides per operand, same length as sizes
  std::array<char*, N> base{};   // first element of each operand
  std::array<int64_t, N> elem_bytes{};
};

// Operands must all have `shape` (broadcast inputs are passed as expanded views).
template <size_t N>
StridedPlan<N> make_plan(const Shape& shape, const std::array<const Tensor*, N>& ops) {
  std::array<const Shape*, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = &ops[k]->strides();
  MergedDims<N> m = merge_dims<N>(shape, strides);
  StridedPlan<N> p;
  p.sizes = std::move(m.sizes);
  p.strides = std::move(m.strides);
  for (size_t k = 0; k < N; ++k) {
    p.base[k] = static_cast<char*>(ops[k]->raw_data());
    p.elem_bytes[k] = static_cast<int64_t>(ops[k]->element_size());
  }
  return p;
}

// Calls row(ptrs, inner_strides, n) for every innermost row, in parallel over rows.
template <size_t N, class Row>
void for_each_row(const StridedPlan<N>& p, const Row& row) {
  const int64_t ndim = static_cast<int64_t>(p.sizes.size());
  const int64_t inner = p.sizes.back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= p.sizes[d];
  if (inner == 0 || rows == 0) return;
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = p.strides[k].back();
  const int64_t grain = std::max<int64_t>(1, 32768 / inner);
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    // Multi-index of row r0 over the outer dims.
    Shape idx(ndim > 1 ? ndim - 1 : 0);
    for (int64_t d = ndim - 2, r = r0; d >= 0; --d) {
      idx[d] = r % p.sizes[d];
      r /= p.sizes[d];
    }
    std::array<char*, N> ptr;
    for (size_t k = 0; k < N; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d + 1 < ndim; ++d) off += idx[d] * p.strides[k][d];
      ptr[k] = p.base[k] + off * p.elem_bytes[k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(ptr, inner_stride, inner);
      for (int64_t d = ndim - 2; d >= 0; --d) {  // advance the odometer
        for (size_t k = 0; k < N; ++k) ptr[k] += p.strides[k][d] * p.elem_bytes[k];
        if (++idx[d] < p.sizes[d]) break;
        for (size_t k = 0; k < N; ++k) ptr[k] -= p.strides[k][d] * p.sizes[d] * p.elem_bytes[k];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace tessera::cpu
