// head_slice (internal): one (sample, head) of a [B, h, N, d] attention operand with unit stride
// along d as an N x d Eigen matrix, so that the CPU kernels of class_attention, xca_attention and
// factor_attention read and write the heads in place (slices of a qkv projection, token-layout outputs) in products that
// Eigen vectorises.
#pragma once
#include <cstdint>

#include <Eigen/Core>

#include "tessera/ops/kernels/strides4.h"

namespace tessera::cpu {

template <class T>
using ColumnVec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A contiguous d×d matrix of one (sample, head): XCA's map, CoaT's context.
template <class T>
using SquareMap = Eigen::Map<RowMatrix<T>>;
template <class T>
using CSquareMap = Eigen::Map<const RowMatrix<T>>;
template <class T>
using SliceMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                            Eigen::OuterStride<>>;
template <class T>
using CSliceMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                             Eigen::OuterStride<>>;

// Slice (b, h) of a [B, h, N, d] view with unit stride along d, as an N x d matrix (a single token's
// stride may be anything: it is never stepped over).
template <class T>
CSliceMap<T> head_slice(const T* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d) {
  return CSliceMap<T>(base + st(b, h, 0, 0), N, d, Eigen::OuterStride<>(N > 1 ? st.s[2] : d));
}
template <class T>
SliceMap<T> head_slice(T* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d) {
  return SliceMap<T>(base + st(b, h, 0, 0), N, d, Eigen::OuterStride<>(N > 1 ? st.s[2] : d));
}

}  // namespace tessera::cpu
