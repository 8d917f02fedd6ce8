// CPU kernels of xca_attention (ops/kernels/xca_attention.h): one (sample, head) per task. The
// products over the tokens are Eigen GEMMs on the head's slices of the qkv projection and of the
// token-layout output (ops/cpu/head_slices.h); the d×d map between them is xca_attention_map's
// (ops/cpu/xca_map.h).
#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/xca_map.h"
#include "tessera/ops/kernels/xca_attention.h"

namespace tessera::cpu {

void xca_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& t, double eps, const Tensor& s,
                   const Tensor& nq, const Tensor& nk, const Tensor& a, const Tensor& y) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), yo = strides4(y);
  TS_DISPATCH_FLOAT(q.dtype(), "xca_attention", [&] {
    using T = scalar_t;
    const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *tp = t.data<T>();
    T *sp = s.data<T>(), *nqp = nq.data<T>(), *nkp = nk.data<T>(), *ap = a.data<T>(), *yp = y.data<T>();
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      XcaMapScratch<T> w(d);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H, mat = r * d * d, vec = r * d;
        const auto qs = head_slice(qp, qo, b, h, N, d), ks = head_slice(kp, ko, b, h, N, d);
        // The channels' norms over the tokens (Eq. 3's normalisation, applied to the map's rows and
        // columns rather than to q and k) and the cross-covariance q·kᵀ, the raw tokens read once.
        Eigen::Map<ColumnVec<T>>(nqp + vec, d) = qs.colwise().norm().transpose();
        Eigen::Map<ColumnVec<T>>(nkp + vec, d) = ks.colwise().norm().transpose();
        SquareMap<T>(sp + mat, d, d).noalias() = qs.transpose() * ks;
        xca_map_matrix(sp + mat, nqp + vec, nkp + vec, tp[h], T(eps), d, ap + mat, w);
        // y[n, i] = Σ_j a_ij·v_j[n] (Eq. 1's V·A_XC), written in token layout.
        head_slice(yp, yo, b, h, N, d).noalias() =
            head_slice(vp, vo, b, h, N, d) * CSquareMap<T>(ap + mat, d, d).transpose();
      }
    });
  });
}

void xca_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                            const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                            const Tensor& gq, const Tensor& gk, const Tensor& gv, const Tensor& row_terms) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 go = strides4(g), qo = strides4(q), ko = strides4(k), vo = strides4(v);
  const Strides4 gqo = strides4(gq), gko = strides4(gk), gvo = strides4(gv);
  TS_DISPATCH_FLOAT(q.dtype(), "xca_attention_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *ap = a.data<T>();
    const T *sp = s.data<T>(), *nqp = nq.data<T>(), *nkp = nk.data<T>(), *tp = t.data<T>();
    T *gqp = gq.data<T>(), *gkp = gk.data<T>(), *gvp = gv.data<T>(), *rp = row_terms.data<T>();
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      XcaMapScratch<T> w(d);
      RowMatrix<T> ga(d, d), gs(d, d);
      ColumnVec<T> q_coef(d), k_coef(d);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H, mat = r * d * d, vec = r * d;
        const auto gr = head_slice(gp, go, b, h, N, d), qs = head_slice(qp, qo, b, h, N, d);
        const auto ks = head_slice(kp, ko, b, h, N, d);
        const CSquareMap<T> map(ap + mat, d, d);
        // Through y = v·aᵀ: the map's gradient g·vᵀ and v's gradient aᵀ·g, per token.
        ga.noalias() = gr.transpose() * head_slice(vp, vo, b, h, N, d);
        head_slice(gvp, gvo, b, h, N, d).noalias() = gr * map;
        xca_map_backward_matrix(ga.data(), ap + mat, sp + mat, nqp + vec, nkp + vec, tp[h], T(eps), d, gs.data(),
                                rp + vec, q_coef.data(), k_coef.data(), w);
        // Through s = q·kᵀ and the norms (ops/xca_attention_map.cpp): gq = gs·k + q_coef·q,
        // gk = gsᵀ·q + k_coef·k, per token.
        auto gqs = head_slice(gqp, gqo, b, h, N, d), gks = head_slice(gkp, gko, b, h, N, d);
        gqs.noalias() = ks * gs.transpose();
        gqs.noalias() += qs * q_coef.asDiagonal();
        gks.noalias() = qs * gs;
        gks.noalias() += ks * k_coef.asDiagonal();
      }
    });
  });
}

}  // namespace tessera::cpu
