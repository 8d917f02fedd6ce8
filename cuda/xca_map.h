// XCA's map on the device (internal): one row or column of one of M d×d matrices per call (formulas:
// ops/kernels/xca_attention_map.h, as ops/cpu/xca_map.h). xca_attention_map's kernels give each row
// a thread of a grid; xca_attention's give each (sample, head) a block and its matrix's rows to the
// block's threads. bfloat16 and float16 compute in float32.
#pragma once
#include <cstdint>

#include "tessera/cuda/device_math.h"
#include "tessera/cuda/launch.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

// Row r = m·d + i: the row's max, exponentials and sum in three sweeps over its d values, worked on
// in w: the output a itself when S computes in itself, else scratch in A, so a half a is rounded
// once, from the final weights.
template <class S, class A>
__device__ void xca_map_row(const S* s, const S* nq, const S* nk, const A* t, A eps, int64_t d, int64_t heads,
                            int64_t r, A* w, S* a) {
  const int64_t m = r / d;
  const A scale = t[m % heads] / dm::max(convert::convert<S, A>(nq[r]), eps);
  const S* sr = s + r * d;
  const S* km = nk + m * d;
  A* wr = w + r * d;
  S* ar = a + r * d;
  A top = -dm::infinity<A>();
  for (int64_t j = 0; j < d; ++j) {
    wr[j] = convert::convert<S, A>(sr[j]) * (A(1) / dm::max(convert::convert<S, A>(km[j]), eps)) * scale;
    top = dm::max(top, wr[j]);
  }
  A total = 0;
  for (int64_t j = 0; j < d; ++j) {
    wr[j] = dm::exp(wr[j] - top);
    total += wr[j];
  }
  const A inv = A(1) / total;
  for (int64_t j = 0; j < d; ++j) ar[j] = convert::convert<A, S>(wr[j] *= inv);
}

// −t·term/n̄² where the norm reaches eps, else 0 (the clamp's gradient): a row's or column's factor
// in the gradient through the norms.
template <class A>
__device__ A xca_norm_coefficient(A temp, A term, A norm, A eps) {
  const A clamped = dm::max(norm, eps);
  return norm >= eps ? -temp * term / (clamped * clamped) : A(0);
}

// The backward's row r = m·d + i: gs, row_terms and q_coef; the row's Σ_j ga·a kept in `dots` for
// the column pass.
template <class S, class A>
__device__ void xca_map_backward_row(const S* ga, const S* a, const S* s, const S* nq, const S* nk, const A* t, A eps,
                                     int64_t d, int64_t heads, int64_t r, S* gs, A* row_terms, A* q_coef, A* dots) {
  const int64_t m = r / d;
  const S* km = nk + m * d;
  A dot = 0;
  for (int64_t j = 0; j < d; ++j) dot += convert::convert<S, A>(ga[r * d + j]) * convert::convert<S, A>(a[r * d + j]);
  const A inv_q = A(1) / dm::max(convert::convert<S, A>(nq[r]), eps), temp = t[m % heads];
  A acc = 0;
  for (int64_t j = 0; j < d; ++j) {
    const A inv_k = A(1) / dm::max(convert::convert<S, A>(km[j]), eps);
    const A gz = convert::convert<S, A>(a[r * d + j]) * (convert::convert<S, A>(ga[r * d + j]) - dot);
    gs[r * d + j] = convert::convert<A, S>(gz * temp * inv_k * inv_q);
    acc += gz * (convert::convert<S, A>(s[r * d + j]) * inv_k * inv_q);
  }
  row_terms[r] = acc;
  q_coef[r] = xca_norm_coefficient(temp, acc, convert::convert<S, A>(nq[r]), eps);
  dots[r] = dot;
}

// The backward's column col = m·d + j, after every row of matrix m: k_coef from C_j = Σ_i gz·c over
// the rows in order, in double.
template <class S, class A>
__device__ void xca_map_backward_column(const S* ga, const S* a, const S* s, const S* nq, const S* nk, const A* t,
                                        A eps, const A* dots, int64_t d, int64_t heads, int64_t col, A* k_coef) {
  const int64_t m = col / d, j = col % d;
  const A inv_k = A(1) / dm::max(convert::convert<S, A>(nk[col]), eps);
  double acc = 0;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t e = (m * d + i) * d + j;
    const A gz = convert::convert<S, A>(a[e]) * (convert::convert<S, A>(ga[e]) - dots[m * d + i]);
    acc += static_cast<double>(
        gz * (convert::convert<S, A>(s[e]) * inv_k / dm::max(convert::convert<S, A>(nq[m * d + i]), eps)));
  }
  k_coef[col] = xca_norm_coefficient(t[m % heads], static_cast<A>(acc), convert::convert<S, A>(nk[col]), eps);
}

}  // namespace tessera::cuda
