// CPU kernels of xca_attention_map (ops/kernels/xca_attention_map.h): XCA's map, one d×d matrix per
// task, rows in order.
#include <algorithm>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/kernels/xca_attention_map.h"

namespace tessera::cpu {

namespace {

struct CosineShape {
  int64_t M, d, heads;
};
CosineShape cosine_shape(const Tensor& s, const Tensor& t) { return {s.size(0), s.size(1), t.numel()}; }

}  // namespace

void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                       const Tensor& a) {
  const CosineShape sh = cosine_shape(s, t);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map", [&] {
    using T = scalar_t;
    const T *sp = s.data<T>(), *qp = nq.data<T>(), *kp = nk.data<T>(), *tp = t.data<T>();
    T* ap = a.data<T>();
    parallel_for(0, sh.M, 1, [&](int64_t m0, int64_t m1) {
      Eigen::Array<T, Eigen::Dynamic, 1> inv_k(sh.d);
      for (int64_t m = m0; m < m1; ++m) {
        const int64_t d = sh.d;
        for (int64_t j = 0; j < d; ++j) inv_k[j] = T(1) / std::max(kp[m * d + j], T(eps));
        for (int64_t i = 0; i < d; ++i) {
          const T scale = tp[m % sh.heads] / std::max(qp[m * d + i], T(eps));
          Row<T> z(ap + (m * d + i) * d, d);
          z = (CRow<T>(sp + (m * d + i) * d, d) * inv_k) * scale;
          z = (z - z.maxCoeff()).exp();
          z *= T(1) / z.sum();
        }
      }
    });
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                                const Tensor& q_coef, const Tensor& k_coef) {
  const CosineShape sh = cosine_shape(s, t);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map_backward", [&] {
    using T = scalar_t;
    const T *gap = ga.data<T>(), *ap = a.data<T>(), *sp = s.data<T>(), *qp = nq.data<T>(), *kp = nk.data<T>();
    const T* tp = t.data<T>();
    T *gsp = gs.data<T>(), *rp = row_terms.data<T>(), *qc = q_coef.data<T>(), *kc = k_coef.data<T>();
    // −t·term/n̄² where the norm reaches eps, else 0 (the clamp's gradient).
    const auto coef = [eps](T temp, T term, T norm) {
      const T clamped = std::max(norm, T(eps));
      return norm >= T(eps) ? -temp * term / (clamped * clamped) : T(0);
    };
    parallel_for(0, sh.M, 1, [&](int64_t m0, int64_t m1) {
      const int64_t d = sh.d;
      Eigen::Array<T, Eigen::Dynamic, 1> inv_k(d), gz(d), c(d);
      Eigen::ArrayXd cols(d);
      for (int64_t m = m0; m < m1; ++m) {
        for (int64_t j = 0; j < d; ++j) inv_k[j] = T(1) / std::max(kp[m * d + j], T(eps));
        cols.setZero();
        const T temp = tp[m % sh.heads];
        for (int64_t i = 0; i < d; ++i) {
          const int64_t row = (m * d + i) * d;
          const CRow<T> ai(ap + row, d), gai(gap + row, d);
          gz = ai * (gai - (gai * ai).sum());
          c = CRow<T>(sp + row, d) * inv_k / std::max(qp[m * d + i], T(eps));
          Row<T>(gsp + row, d) = gz * temp * inv_k / std::max(qp[m * d + i], T(eps));
          rp[m * d + i] = (gz * c).sum();
          qc[m * d + i] = coef(temp, rp[m * d + i], qp[m * d + i]);
          cols += (gz * c).template cast<double>();
        }
        for (int64_t j = 0; j < d; ++j) kc[m * d + j] = coef(temp, static_cast<T>(cols[j]), kp[m * d + j]);
      }
    });
  });
}

}  // namespace tessera::cpu
