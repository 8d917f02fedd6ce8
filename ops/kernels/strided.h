// Walking several same-shaped strided operands (internal, every device): the dims are reduced to
// as few as possible before any kernel runs. Size-1 dims are dropped, the others are taken in the
// memory order of one operand (the output, normally: largest stride first), and neighbouring dims
// that are contiguous with each other in every operand are merged. So the common cases (contiguous,
// a broadcast row, a scalar) become a single dim, and so do operands that share a permuted dense
// layout (the gradient of a permuted view): the walk follows memory, not the logical dim order,
// and a vector path can take it. Every caller treats the positions of the walk independently
// (element-wise maps, batch entries), so the order of the dims is theirs to choose.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <numeric>
#include <vector>

#include "tessera/core/levers.h"
#include "tessera/core/shape.h"

namespace tessera {

template <size_t N>
struct MergedDims {
  Shape sizes;                   // outermost first; never empty (a single element is [1])
  std::array<Shape, N> strides;  // per operand, in elements, same length as sizes
};

// `strides[k]` are operand k's strides for `shape`; the walk follows operand `lead`'s memory order.
template <size_t N>
MergedDims<N> merge_dims(const Shape& shape, const std::array<const Shape*, N>& strides, size_t lead = 0) {
  std::vector<size_t> order(shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const Shape& by = *strides[lead];
  if (levers().memory_order_walks)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return by[a] > by[b]; });
  MergedDims<N> m;
  for (const size_t d : order) {
    if (shape[d] == 1) continue;  // contributes nothing to the walk
    bool merge = !m.sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = m.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      m.sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) m.strides[k].back() = (*strides[k])[d];
    } else {
      m.sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) m.strides[k].push_back((*strides[k])[d]);
    }
  }
  if (m.sizes.empty()) {
    m.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) m.strides[k].push_back(1);
  }
  return m;
}

}  // namespace tessera
