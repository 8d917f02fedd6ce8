// CUDA kernels of xca_attention_map (ops/kernels/xca_attention_map.h; formulas as
// ops/cpu/xca_attention_map.cpp): a thread per row of the small d×d matrices (d is 32 to 64), the
// backward's column terms in a second pass with a thread per column, adding the rows in order.
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/xca_attention_map.h"

namespace tessera::cuda {

namespace {

// ---- XCA's map: M matrices of d×d (d, the channels per head, is small: 32 to 64 in XCiT) -----------

// One thread per row (m, i): the row's max, exponentials and sum in three sweeps over its d values.
template <class T>
__global__ void xca_attention_map_rows(const T* s, const T* nq, const T* nk, const T* t, T eps, int64_t M, int64_t d,
                                       int64_t heads, T* a) {
  TS_GRID_STRIDE_LOOP(r, M * d) {
    const int64_t m = r / d;
    const T scale = t[m % heads] / dm::max(nq[r], eps);
    const T* sr = s + r * d;
    const T* km = nk + m * d;
    T* ar = a + r * d;
    T top = -dm::infinity<T>();
    for (int64_t j = 0; j < d; ++j) {
      ar[j] = sr[j] * (T(1) / dm::max(km[j], eps)) * scale;
      top = dm::max(top, ar[j]);
    }
    T total = 0;
    for (int64_t j = 0; j < d; ++j) {
      ar[j] = dm::exp(ar[j] - top);
      total += ar[j];
    }
    const T inv = T(1) / total;
    for (int64_t j = 0; j < d; ++j) ar[j] *= inv;
  }
}

// Rows (m, i): gs and row_terms; each row's Σ_j ga·a kept in `dots` for the column pass.
template <class T>
__global__ void xca_attention_map_backward_rows(const T* ga, const T* a, const T* s, const T* nq, const T* nk,
                                                const T* t, T eps, int64_t M, int64_t d, int64_t heads, T* gs,
                                                T* row_terms, T* dots) {
  TS_GRID_STRIDE_LOOP(r, M * d) {
    const int64_t m = r / d;
    const T* km = nk + m * d;
    T dot = 0;
    for (int64_t j = 0; j < d; ++j) dot += ga[r * d + j] * a[r * d + j];
    const T inv_q = T(1) / dm::max(nq[r], eps), temp = t[m % heads];
    T acc = 0;
    for (int64_t j = 0; j < d; ++j) {
      const T inv_k = T(1) / dm::max(km[j], eps);
      const T gz = a[r * d + j] * (ga[r * d + j] - dot);
      gs[r * d + j] = gz * temp * inv_k * inv_q;
      acc += gz * (s[r * d + j] * inv_k * inv_q);
    }
    row_terms[r] = acc;
    dots[r] = dot;
  }
}

// Columns (m, j): col_terms = Σ_i gz·c over the rows in order, in double.
template <class T>
__global__ void xca_attention_map_backward_columns(const T* ga, const T* a, const T* s, const T* nq, const T* nk, T eps,
                                                   const T* dots, int64_t M, int64_t d, T* col_terms) {
  TS_GRID_STRIDE_LOOP(col, M * d) {
    const int64_t m = col / d, j = col % d;
    const T inv_k = T(1) / dm::max(nk[col], eps);
    double acc = 0;
    for (int64_t i = 0; i < d; ++i) {
      const int64_t e = (m * d + i) * d + j;
      const T gz = a[e] * (ga[e] - dots[m * d + i]);
      acc += static_cast<double>(gz * (s[e] * inv_k / dm::max(nq[m * d + i], eps)));
    }
    col_terms[col] = static_cast<T>(acc);
  }
}

}  // namespace

void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                       const Tensor& a) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map", [&] {
    using T = scalar_t;
    launch("xca_attention_map", xca_attention_map_rows<T>, blocks_for(M * d), kBlockThreads, 0, ctx.stream,
           s.device_data<T>(), nq.device_data<T>(), nk.device_data<T>(), t.device_data<T>(), static_cast<T>(eps), M, d,
           t.numel(), a.device_data<T>());
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                                const Tensor& col_terms) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map_backward", [&] {
    using T = scalar_t;
    const Tensor dots = Tensor::empty({M * d}, s.dtype(), s.device());
    launch("xca_attention_map_backward rows", xca_attention_map_backward_rows<T>, blocks_for(M * d), kBlockThreads, 0,
           ctx.stream, ga.device_data<T>(), a.device_data<T>(), s.device_data<T>(), nq.device_data<T>(),
           nk.device_data<T>(), t.device_data<T>(), static_cast<T>(eps), M, d, t.numel(), gs.device_data<T>(),
           row_terms.device_data<T>(), dots.device_data<T>());
    launch("xca_attention_map_backward columns", xca_attention_map_backward_columns<T>, blocks_for(M * d),
           kBlockThreads, 0, ctx.stream, ga.device_data<T>(), a.device_data<T>(), s.device_data<T>(),
           nq.device_data<T>(), nk.device_data<T>(), static_cast<T>(eps), dots.device_data<T>(), M, d,
           col_terms.device_data<T>());
  });
}

}  // namespace tessera::cuda
