// CPU kernels of xca_attention_map (ops/kernels/xca_attention_map.h): XCA's map, one d×d matrix per
// task, rows in order (the arithmetic per matrix: ops/cpu/xca_map.h). bfloat16 activations are
// converted a matrix at a time (ops/cpu/storage.h).
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/cpu/xca_map.h"
#include "tessera/ops/kernels/xca_attention_map.h"

namespace tessera::cpu {

// s, nq, nk, a and their gradients are activations (S); the temperatures, the row terms and the
// norms' coefficients are compute values (as on cuda).
void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                       const Tensor& a) {
  const int64_t M = s.size(0), d = s.size(1), heads = t.numel();
  TS_DISPATCH_STORED(s.dtype(), "xca_attention_map", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *sp = s.data<S>(), *qp = nq.data<S>(), *kp = nk.data<S>();
    const T* tp = t.data<T>();
    S* ap = a.data<S>();
    parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
      XcaMapScratch<T> w(d);
      RunIn<S> in_s, in_q, in_k;
      RunOut<S> out_a;
      for (int64_t m = m0; m < m1; ++m) {
        xca_map_matrix(in_s(sp + m * d * d, d * d), in_q(qp + m * d, d), in_k(kp + m * d, d), tp[m % heads], T(eps), d,
                       out_a(ap + m * d * d, d * d), w);
        out_a.done();
      }
    });
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                                const Tensor& q_coef, const Tensor& k_coef) {
  const int64_t M = s.size(0), d = s.size(1), heads = t.numel();
  TS_DISPATCH_STORED(s.dtype(), "xca_attention_map_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gap = ga.data<S>(), *ap = a.data<S>(), *sp = s.data<S>(), *qp = nq.data<S>(), *kp = nk.data<S>();
    const T* tp = t.data<T>();
    S* gsp = gs.data<S>();
    T *rp = row_terms.data<T>(), *qc = q_coef.data<T>(), *kc = k_coef.data<T>();
    parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
      XcaMapScratch<T> w(d);
      RunIn<S> in_ga, in_a, in_s, in_q, in_k;
      RunOut<S> out_gs;
      for (int64_t m = m0; m < m1; ++m) {
        const int64_t mat = m * d * d, vec = m * d;
        xca_map_backward_matrix(in_ga(gap + mat, d * d), in_a(ap + mat, d * d), in_s(sp + mat, d * d),
                                in_q(qp + vec, d), in_k(kp + vec, d), tp[m % heads], T(eps), d,
                                out_gs(gsp + mat, d * d), rp + vec, qc + vec, kc + vec, w);
        out_gs.done();
      }
    });
  });
}

}  // namespace tessera::cpu
