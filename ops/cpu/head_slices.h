// head_slice (internal): one (sample, head) of a [B, h, N, d] attention operand with unit stride
// along d as an N x d Eigen matrix, so that the CPU kernels of class_attention, xca_attention and
// factor_attention read and write the heads in place (slices of a qkv projection, token-layout outputs) in products that
// Eigen vectorises. The overloads on a RunIn / RunOut (ops/cpu/storage.h) stage a slice of stored
// values as compute values: in place where S is its own compute type, converted a slice at a time
// for bfloat16.
#pragma once
#include <cstdint>

#include <Eigen/Core>

#include "tessera/ops/cpu/storage.h"
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

// The row stride of slice (b, h) of N tokens (a single token's stride may be anything: it is never
// stepped over).
inline int64_t slice_stride(const Strides4& st, int64_t N, int64_t d) { return N > 1 ? st.s[2] : d; }

// Slice (b, h) of a [B, h, N, d] view with unit stride along d, as an N x d matrix.
template <class T>
CSliceMap<T> head_slice(const T* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d) {
  return CSliceMap<T>(base + st(b, h, 0, 0), N, d, Eigen::OuterStride<>(slice_stride(st, N, d)));
}
template <class T>
SliceMap<T> head_slice(T* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d) {
  return SliceMap<T>(base + st(b, h, 0, 0), N, d, Eigen::OuterStride<>(slice_stride(st, N, d)));
}

// Slice (b, h) of stored values as compute values read through `in` (valid until its next call).
template <class S>
CSliceMap<compute_t<S>> head_slice(RunIn<S>& in, const S* base, const Strides4& st, int64_t b, int64_t h, int64_t N,
                                   int64_t d) {
  const int64_t ld = slice_stride(st, N, d);
  return CSliceMap<compute_t<S>>(in.matrix(base + st(b, h, 0, 0), N, d, ld), N, d,
                                 Eigen::OuterStride<>(RunIn<S>::rows_stride(ld, d)));
}
// Slice (b, h) of stored values to compute through `out`, stored by out.done().
template <class S>
SliceMap<compute_t<S>> head_slice(RunOut<S>& out, S* base, const Strides4& st, int64_t b, int64_t h, int64_t N,
                                  int64_t d) {
  const int64_t ld = slice_stride(st, N, d);
  return SliceMap<compute_t<S>>(out.matrix(base + st(b, h, 0, 0), N, d, ld), N, d,
                                Eigen::OuterStride<>(RunIn<S>::rows_stride(ld, d)));
}

// Slice (b, h) copied into the dense N×d matrix `dst` as compute values (a softmax's working copy).
template <class S>
void load_head_slice(const S* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d,
                     RowMatrix<compute_t<S>>& dst) {
  dst.resize(N, d);
  load_rows(base + st(b, h, 0, 0), st.s[2], dst.data(), d, N, d);
}

// The d values of token n of (b, h), any stride along d, as compute values: in place where S is
// its own compute type (stride st.s[3]), else dense; head_row_stride gives the result's stride.
template <class S>
int64_t head_row_stride(const Strides4& st) {
  return RunIn<S>::rows_stride(st.s[3], 1);
}
template <class S>
const compute_t<S>* head_row(RunIn<S>& in, const S* base, const Strides4& st, int64_t b, int64_t h, int64_t n,
                             int64_t d) {
  const S* src = base + st(b, h, n, 0);
  if constexpr (kConverted<S>) return in.strided(src, st.s[3], d);
  else return src;
}
// The same row to compute through `out`, stored by out.done().
template <class S>
compute_t<S>* head_row(RunOut<S>& out, S* base, const Strides4& st, int64_t b, int64_t h, int64_t n, int64_t d) {
  S* dst = base + st(b, h, n, 0);
  return st.s[3] == 1 ? out(dst, d) : out.matrix(dst, d, 1, st.s[3]);
}

}  // namespace tessera::cpu
