// CUDA kernels of xca_attention_map (ops/kernels/xca_attention_map.h; formulas as
// ops/cpu/xca_attention_map.cpp): a thread per row of the small d×d matrices (d is 32 to 64), the
// backward's column terms in a second pass with a thread per column, adding the rows in order.
// bfloat16 and float16 compute in float32.
#include <type_traits>

#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/xca_attention_map.h"

namespace tessera::cuda {

namespace {

// ---- XCA's map: M matrices of d×d (d, the channels per head, is small: 32 to 64 in XCiT) -----------

// One thread per row (m, i): the row's max, exponentials and sum in three sweeps over its d values,
// worked on in w: the output a itself when S computes in itself, else scratch in A, so a half a is
// rounded once, from the final weights.
template <class S, class A>
__global__ void xca_attention_map_rows(const S* s, const S* nq, const S* nk, const A* t, A eps, int64_t M, int64_t d,
                                       int64_t heads, A* w, S* a) {
  TS_GRID_STRIDE_LOOP(r, M * d) {
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
}

// −t·term/n̄² where the norm reaches eps, else 0 (the clamp's gradient): a row's or column's factor
// in the gradient through the norms.
template <class A>
__device__ A norm_coefficient(A temp, A term, A norm, A eps) {
  const A clamped = dm::max(norm, eps);
  return norm >= eps ? -temp * term / (clamped * clamped) : A(0);
}

// Rows (m, i): gs, row_terms and q_coef; each row's Σ_j ga·a kept in `dots` for the column pass.
template <class S, class A>
__global__ void xca_attention_map_backward_rows(const S* ga, const S* a, const S* s, const S* nq, const S* nk,
                                                const A* t, A eps, int64_t M, int64_t d, int64_t heads, S* gs,
                                                A* row_terms, A* q_coef, A* dots) {
  TS_GRID_STRIDE_LOOP(r, M * d) {
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
    q_coef[r] = norm_coefficient(temp, acc, convert::convert<S, A>(nq[r]), eps);
    dots[r] = dot;
  }
}

// Columns (m, j): k_coef from C_j = Σ_i gz·c over the rows in order, in double.
template <class S, class A>
__global__ void xca_attention_map_backward_columns(const S* ga, const S* a, const S* s, const S* nq, const S* nk,
                                                   const A* t, A eps, const A* dots, int64_t M, int64_t d,
                                                   int64_t heads, A* k_coef) {
  TS_GRID_STRIDE_LOOP(col, M * d) {
    const int64_t m = col / d, j = col % d;
    const A inv_k = A(1) / dm::max(convert::convert<S, A>(nk[col]), eps);
    double acc = 0;
    for (int64_t i = 0; i < d; ++i) {
      const int64_t e = (m * d + i) * d + j;
      const A gz = convert::convert<S, A>(a[e]) * (convert::convert<S, A>(ga[e]) - dots[m * d + i]);
      acc += static_cast<double>(
          gz * (convert::convert<S, A>(s[e]) * inv_k / dm::max(convert::convert<S, A>(nq[m * d + i]), eps)));
    }
    k_coef[col] = norm_coefficient(t[m % heads], static_cast<A>(acc), convert::convert<S, A>(nk[col]), eps);
  }
}

}  // namespace

void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                       const Tensor& a) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  dispatch_floating(s.dtype(), "xca_attention_map", [&]<class S, class A>() {
    const Tensor w = std::is_same_v<S, A> ? a : Tensor::empty({M * d * d}, DTypeOf<A>::value, a.device());
    launch("xca_attention_map", xca_attention_map_rows<S, A>, blocks_for(M * d), kBlockThreads, 0, ctx.stream,
           s.device_data<S>(), nq.device_data<S>(), nk.device_data<S>(), t.device_data<A>(), static_cast<A>(eps), M, d,
           t.numel(), w.device_data<A>(), a.device_data<S>());
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                                const Tensor& q_coef, const Tensor& k_coef) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  dispatch_floating(s.dtype(), "xca_attention_map_backward", [&]<class S, class A>() {
    const Tensor dots = Tensor::empty({M * d}, DTypeOf<A>::value, s.device());
    launch("xca_attention_map_backward rows", xca_attention_map_backward_rows<S, A>, blocks_for(M * d), kBlockThreads,
           0, ctx.stream, ga.device_data<S>(), a.device_data<S>(), s.device_data<S>(), nq.device_data<S>(),
           nk.device_data<S>(), t.device_data<A>(), static_cast<A>(eps), M, d, t.numel(), gs.device_data<S>(),
           row_terms.device_data<A>(), q_coef.device_data<A>(), dots.device_data<A>());
    launch("xca_attention_map_backward columns", xca_attention_map_backward_columns<S, A>, blocks_for(M * d),
           kBlockThreads, 0, ctx.stream, ga.device_data<S>(), a.device_data<S>(), s.device_data<S>(),
           nq.device_data<S>(), nk.device_data<S>(), t.device_data<A>(), static_cast<A>(eps), dots.device_data<A>(), M,
           d, t.numel(), k_coef.device_data<A>());
  });
}

}  // namespace tessera::cuda
