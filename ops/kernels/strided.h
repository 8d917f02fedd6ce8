// Walking several same-shaped strided operands (internal, every device): the dims are reduced to
// as few as possible before any kernel runs. Size-1 dims are dropped and neighbouring dims that are
// contiguous with each other in every operand are merged, so the common cases (contiguous, a
// broadcast row, a scalar) become a single dim.
#pragma once
#include <array>
#include <cstddef>

#include "tessera/core/shape.h"

namespace tessera {

template <size_t N>
struct MergedDims {
  Shape sizes;                   // outermost first; never empty (a single element is [1])
  std::array<Shape, N> strides;  // per operand, in elements, same length as sizes
};

// `strides[k]` are operand k's strides for `shape`.
template <size_t N>
MergedDims<N> merge_dims(const Shape& shape, const std::array<const Shape*, N>& strides) {
  MergedDims<N> m;
  for (size_t d = 0; d < shape.size(); ++d) {
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
