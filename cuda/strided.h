// Element offsets of N same-shaped strided operands, for kernels that walk tensors of any layout
// (views, broadcasts, transposes). The host merges the dims first (ops/kernels/strided.h), so most
// tensors reach the kernel with one or two dims; each thread turns its linear index into the N
// offsets with one division per remaining dim. Two fast paths, chosen on the host and uniform
// across the grid: operands whose dims all merge into one (contiguous ones, and contiguous with a
// broadcast scalar) need no division at all, and a tensor of fewer than 2³¹ elements divides in
// 32 bits (a 64-bit division is a long instruction sequence on a GPU; a 32-bit one a few).
#pragma once
#include <array>
#include <cstdint>

#include "tessera/core/error.h"
#include "tessera/core/host_device.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strided.h"

namespace tessera::cuda {

constexpr int kMaxDims = 10;

template <int N>
struct StridedOffsets {
  int ndim = 0;
  bool index32 = false;  // every linear index fits in 32 bits
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  TS_HOST_DEVICE void offsets(int64_t linear, int64_t (&off)[N]) const {
    if (ndim == 1) {
      for (int k = 0; k < N; ++k) off[k] = linear * strides[k][0];
      return;
    }
    for (int k = 0; k < N; ++k) off[k] = 0;
    if (index32) {
      auto rest = static_cast<uint32_t>(linear);
      for (int d = ndim - 1; d >= 0; --d) {
        const auto size = static_cast<uint32_t>(sizes[d]);
        const uint32_t i = rest % size;
        rest /= size;
        for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(i) * strides[k][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += i * strides[k][d];
    }
  }
};

// Operand k has strides *strides[k] for `shape`. Throws naming `op` when the layout has more than
// kMaxDims dims after merging (the caller makes such an operand contiguous first).
template <int N>
StridedOffsets<N> strided_offsets(const Shape& shape, const std::array<const Shape*, N>& strides, const char* op) {
  const MergedDims<N> m = merge_dims<N>(shape, strides);
  TS_CHECK(static_cast<int>(m.sizes.size()) <= kMaxDims, op, ": a layout of ", m.sizes.size(),
           " non-mergeable dims exceeds the ", kMaxDims, " a CUDA kernel takes");
  StridedOffsets<N> s;
  s.ndim = static_cast<int>(m.sizes.size());
  int64_t numel = 1;
  for (int d = 0; d < s.ndim; ++d) {
    s.sizes[d] = m.sizes[d];
    numel *= m.sizes[d];
    for (int k = 0; k < N; ++k) s.strides[k][d] = m.strides[k][d];
  }
  s.index32 = numel < (int64_t{1} << 31);
  return s;
}

// The same for tensors that all have `shape`.
template <int N>
StridedOffsets<N> strided_offsets(const Shape& shape, const std::array<const Tensor*, N>& operands, const char* op) {
  std::array<const Shape*, N> strides;
  for (int k = 0; k < N; ++k) strides[k] = &operands[k]->strides();
  return strided_offsets<N>(shape, strides, op);
}

}  // namespace tessera::cuda
