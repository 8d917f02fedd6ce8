// CPU kernels of xca_attention_map (ops/kernels/xca_attention_map.h): XCA's map, one d×d matrix per
// task, rows in order (the arithmetic per matrix: ops/cpu/xca_map.h).
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/xca_map.h"
#include "tessera/ops/kernels/xca_attention_map.h"

namespace tessera::cpu {

void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                       const Tensor& a) {
  const int64_t M = s.size(0), d = s.size(1), heads = t.numel();
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map", [&] {
    using T = scalar_t;
    const T *sp = s.data<T>(), *qp = nq.data<T>(), *kp = nk.data<T>(), *tp = t.data<T>();
    T* ap = a.data<T>();
    parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
      XcaMapScratch<T> w(d);
      for (int64_t m = m0; m < m1; ++m)
        xca_map_matrix(sp + m * d * d, qp + m * d, kp + m * d, tp[m % heads], T(eps), d, ap + m * d * d, w);
    });
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                                const Tensor& q_coef, const Tensor& k_coef) {
  const int64_t M = s.size(0), d = s.size(1), heads = t.numel();
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map_backward", [&] {
    using T = scalar_t;
    const T *gap = ga.data<T>(), *ap = a.data<T>(), *sp = s.data<T>(), *qp = nq.data<T>(), *kp = nk.data<T>();
    const T* tp = t.data<T>();
    T *gsp = gs.data<T>(), *rp = row_terms.data<T>(), *qc = q_coef.data<T>(), *kc = k_coef.data<T>();
    parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
      XcaMapScratch<T> w(d);
      for (int64_t m = m0; m < m1; ++m) {
        const int64_t mat = m * d * d, vec = m * d;
        xca_map_backward_matrix(gap + mat, ap + mat, sp + mat, qp + vec, kp + vec, tp[m % heads], T(eps), d, gsp + mat,
                                rp + vec, qc + vec, kc + vec, w);
      }
    });
  });
}

}  // namespace tessera::cpu
