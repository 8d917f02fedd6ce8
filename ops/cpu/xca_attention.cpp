// CPU kernels of xca_attention (ops/kernels/xca_attention.h): one (sample, head) per task. The
// products over the tokens are Eigen GEMMs on the head's slices of the qkv projection and of the
// token-layout output (ops/cpu/head_slices.h); the d×d map between them is xca_attention_map's
// (ops/cpu/xca_map.h). bfloat16 activations are converted a slice at a time (ops/cpu/storage.h).
#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/cpu/xca_map.h"
#include "tessera/ops/kernels/xca_attention.h"

namespace tessera::cpu {

// q, k, v, y and the saved s, nq, nk and a are activations (S); the temperatures and the
// backward's row terms are compute values (as on cuda).
void xca_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& t, double eps, const Tensor& s,
                   const Tensor& nq, const Tensor& nk, const Tensor& a, const Tensor& y) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), yo = strides4(y);
  TS_DISPATCH_STORED(q.dtype(), "xca_attention", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *qp = q.data<S>(), *kp = k.data<S>(), *vp = v.data<S>();
    const T* tp = t.data<T>();
    S *sp = s.data<S>(), *nqp = nq.data<S>(), *nkp = nk.data<S>(), *ap = a.data<S>(), *yp = y.data<S>();
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      XcaMapScratch<T> w(d);
      RunIn<S> in_q, in_k, in_v;
      RunOut<S> out_s, out_nq, out_nk, out_a, out_y;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H, mat = r * d * d, vec = r * d;
        const auto qs = head_slice(in_q, qp, qo, b, h, N, d), ks = head_slice(in_k, kp, ko, b, h, N, d);
        T *sr = out_s(sp + mat, d * d), *nqr = out_nq(nqp + vec, d), *nkr = out_nk(nkp + vec, d);
        T* ar = out_a(ap + mat, d * d);
        // The channels' norms over the tokens (Eq. 3's normalisation, applied to the map's rows and
        // columns rather than to q and k) and the cross-covariance q·kᵀ, the raw tokens read once.
        Eigen::Map<ColumnVec<T>>(nqr, d) = qs.colwise().norm().transpose();
        Eigen::Map<ColumnVec<T>>(nkr, d) = ks.colwise().norm().transpose();
        SquareMap<T>(sr, d, d).noalias() = qs.transpose() * ks;
        // The map and y from the unrounded s, norms and weights (bfloat16 rounds only what is stored).
        xca_map_matrix(sr, nqr, nkr, tp[h], T(eps), d, ar, w);
        // y[n, i] = Σ_j a_ij·v_j[n] (Eq. 1's V·A_XC), written in token layout.
        head_slice(out_y, yp, yo, b, h, N, d).noalias() =
            head_slice(in_v, vp, vo, b, h, N, d) * CSquareMap<T>(ar, d, d).transpose();
        for (RunOut<S>* out : {&out_s, &out_nq, &out_nk, &out_a, &out_y}) out->done();
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
  TS_DISPATCH_STORED(q.dtype(), "xca_attention_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gp = g.data<S>(), *qp = q.data<S>(), *kp = k.data<S>(), *vp = v.data<S>(), *ap = a.data<S>();
    const S *sp = s.data<S>(), *nqp = nq.data<S>(), *nkp = nk.data<S>();
    const T* tp = t.data<T>();
    S *gqp = gq.data<S>(), *gkp = gk.data<S>(), *gvp = gv.data<S>();
    T* rp = row_terms.data<T>();
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      XcaMapScratch<T> w(d);
      RowMatrix<T> ga(d, d), gs(d, d);  // compute values throughout (cuda rounds them to S)
      ColumnVec<T> q_coef(d), k_coef(d);
      RunIn<S> in_g, in_q, in_k, in_v, in_a, in_s, in_nq, in_nk;
      RunOut<S> out_gq, out_gk, out_gv;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H, mat = r * d * d, vec = r * d;
        const auto gr = head_slice(in_g, gp, go, b, h, N, d), qs = head_slice(in_q, qp, qo, b, h, N, d);
        const auto ks = head_slice(in_k, kp, ko, b, h, N, d);
        const T* ar = in_a(ap + mat, d * d);
        const CSquareMap<T> map(ar, d, d);
        // Through y = v·aᵀ: the map's gradient g·vᵀ and v's gradient aᵀ·g, per token.
        ga.noalias() = gr.transpose() * head_slice(in_v, vp, vo, b, h, N, d);
        head_slice(out_gv, gvp, gvo, b, h, N, d).noalias() = gr * map;
        xca_map_backward_matrix(ga.data(), ar, in_s(sp + mat, d * d), in_nq(nqp + vec, d), in_nk(nkp + vec, d), tp[h],
                                T(eps), d, gs.data(), rp + vec, q_coef.data(), k_coef.data(), w);
        // Through s = q·kᵀ and the norms (ops/xca_attention_map.cpp): gq = gs·k + q_coef·q,
        // gk = gsᵀ·q + k_coef·k, per token.
        auto gqs = head_slice(out_gq, gqp, gqo, b, h, N, d), gks = head_slice(out_gk, gkp, gko, b, h, N, d);
        gqs.noalias() = ks * gs.transpose();
        gqs.noalias() += qs * q_coef.asDiagonal();
        gks.noalias() = qs * gs;
        gks.noalias() += ks * k_coef.asDiagonal();
        for (RunOut<S>* out : {&out_gq, &out_gk, &out_gv}) out->done();
      }
    });
  });
}

}  // namespace tessera::cpu
