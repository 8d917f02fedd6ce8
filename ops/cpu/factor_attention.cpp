// CPU kernels of factor_attention (ops/kernels/factor_attention.h): one (sample, head) per task.
// The products over the tokens are Eigen GEMMs on the head's slices of the qkv projection and of the
// token-layout output (ops/cpu/head_slices.h); the softmax of k over the tokens lives in one N×d
// scratch per task, never in a [B, h, N, d] tensor.
#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/kernels/factor_attention.h"

namespace tessera::cpu {

namespace {

template <class T>
using ChannelRow = Eigen::Array<T, 1, Eigen::Dynamic>;

// The image rows of (b, h) of cv [B, h, N−1, d], any strides (the depthwise convolution's output
// as CRPE reshapes it), as an (N−1)×d matrix.
template <class T>
auto crpe_image_rows(const T* base, const Strides4& st, int64_t b, int64_t h, int64_t rows, int64_t d) {
  using Map = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;
  return Map(base + st(b, h, 0, 0), rows, d, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(st.s[2], st.s[3]));
}

}  // namespace

void factor_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cv, double scale,
                      const Tensor& ctx, const Tensor& lse, const Tensor& y) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), co = strides4(cv), yo = strides4(y);
  TS_DISPATCH_FLOAT(q.dtype(), "factor_attention", [&] {
    using T = scalar_t;
    const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *cp = cv.data<T>();
    T *xp = ctx.data<T>(), *lp = lse.data<T>(), *yp = y.data<T>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      RowMatrix<T> p(N, d);
      ChannelRow<T> top(d), sums(d);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const auto qs = head_slice(qp, qo, b, h, N, d), ks = head_slice(kp, ko, b, h, N, d);
        // Eq. 3's softmax(K) over the N tokens, per channel: the columns' maxima and sums, kept as
        // log-sum-exps so that the backward recomputes p instead of storing it.
        top = ks.colwise().maxCoeff().array();
        p = (ks.array().rowwise() - top).exp().matrix();
        sums = p.colwise().sum().array();
        p.array().rowwise() /= sums;
        Eigen::Map<ChannelRow<T>>(lp + r * d, d) = top + sums.log();
        // The d×d context softmax(K)ᵀV first (the factorization's point: no N×N map), then Eq. 12's
        // scale·Q·context plus the CRPE term Q_img ⊙ cv on the image tokens, in token layout.
        SquareMap<T> context(xp + r * d * d, d, d);
        context.noalias() = p.transpose() * head_slice(vp, vo, b, h, N, d);
        auto ys = head_slice(yp, yo, b, h, N, d);
        ys.noalias() = qs * context;
        ys *= sc;
        ys.bottomRows(N - 1).array() += qs.bottomRows(N - 1).array() * crpe_image_rows(cp, co, b, h, N - 1, d).array();
      }
    });
  });
}

void factor_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cv,
                               const Tensor& ctx, const Tensor& lse, double scale, const Tensor& gq, const Tensor& gk,
                               const Tensor& gv, const Tensor& gcv) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 go = strides4(g), qo = strides4(q), ko = strides4(k), vo = strides4(v), co = strides4(cv);
  const Strides4 gqo = strides4(gq), gko = strides4(gk), gvo = strides4(gv), gco = strides4(gcv);
  TS_DISPATCH_FLOAT(q.dtype(), "factor_attention_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *cp = cv.data<T>();
    const T *xp = ctx.data<T>(), *lp = lse.data<T>();
    T *gqp = gq.data<T>(), *gkp = gk.data<T>(), *gvp = gv.data<T>(), *gcp = gcv.data<T>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      RowMatrix<T> p(N, d), gcontext(d, d);
      ChannelRow<T> dot(d);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const auto gs = head_slice(gp, go, b, h, N, d), qs = head_slice(qp, qo, b, h, N, d);
        const auto vs = head_slice(vp, vo, b, h, N, d);
        const auto cvs = crpe_image_rows(cp, co, b, h, N - 1, d);
        const CSquareMap<T> context(xp + r * d * d, d, d);
        p = (head_slice(kp, ko, b, h, N, d).array().rowwise() - Eigen::Map<const ChannelRow<T>>(lp + r * d, d)).exp();
        // Through y = scale·q·context + pad(q_img ⊙ cv): q's two terms, cv's, and the context's.
        auto gqs = head_slice(gqp, gqo, b, h, N, d);
        gqs.noalias() = gs * context.transpose();
        gqs *= sc;
        gqs.bottomRows(N - 1).array() += gs.bottomRows(N - 1).array() * cvs.array();
        head_slice(gcp, gco, b, h, N - 1, d).array() = gs.bottomRows(N - 1).array() * qs.bottomRows(N - 1).array();
        gcontext.noalias() = qs.transpose() * gs;
        gcontext *= sc;
        // Through context = pᵀ·v: gv = p·gcontext, and softmax's backward over the tokens with its
        // row term Σ_n p_ni·(v·gcontextᵀ)_ni = Σ_c context_ic·gcontext_ic, no pass over the tokens.
        head_slice(gvp, gvo, b, h, N, d).noalias() = p * gcontext;
        dot = (context.array() * gcontext.array()).rowwise().sum().transpose();
        auto gks = head_slice(gkp, gko, b, h, N, d);
        gks.noalias() = vs * gcontext.transpose();
        gks.array() = (gks.array().rowwise() - dot) * p.array();
      }
    });
  });
}

}  // namespace tessera::cpu
