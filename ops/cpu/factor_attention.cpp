// CPU kernels of factor_attention (ops/kernels/factor_attention.h): one (sample, head) per task.
// The products over the tokens are Eigen GEMMs on the head's slices of the qkv projection and of the
// token-layout output (ops/cpu/head_slices.h); the softmax of k over the tokens lives in one N×d
// scratch per task, never in a [B, h, N, d] tensor. ctx and every activation are stored as S, lse in
// the compute type (as on cuda); bfloat16 activations are converted a slice at a time.
#include <algorithm>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/factor_attention.h"

namespace tessera::cpu {

namespace {

template <class T>
using ChannelRow = Eigen::Array<T, 1, Eigen::Dynamic>;

// The image rows of (b, h) of cv [B, h, N−1, d], any strides (the depthwise convolution's output
// as CRPE reshapes it), as an (N−1)×d matrix of compute values: in place, or converted into
// `buffer` (dense) where S is converted.
template <class S>
auto crpe_image_rows(RunBuffer<S>& buffer, const S* base, const Strides4& st, int64_t b, int64_t h, int64_t rows,
                     int64_t d) {
  using T = compute_t<S>;
  using Stride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  using Map = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Stride>;
  const S* src = base + st(b, h, 0, 0);
  if constexpr (!kConverted<S>) {
    return Map(src, rows, d, Stride(st.s[2], st.s[3]));
  } else {
    T* dst = buffer.get(rows * d);
    for (int64_t n = 0; n < rows; ++n) load_strided(src + n * st.s[2], st.s[3], dst + n * d, d);
    return Map(dst, rows, d, Stride(d, 1));
  }
}

// p's columns exponentiated after subtracting each column's maximum `top`, and their sums: a
// softmax over the rows per column, not yet divided by `sums`. Row by row: Eigen's colwise() of a
// row-major matrix walks each column alone, a scalar loop; and p's rows are dense (on a strided
// slice Eigen's exp is a scalar call per element).
template <class T>
void exp_over_columns(RowMatrix<T>& p, ChannelRow<T>& top, ChannelRow<T>& sums) {
  top = p.row(0).array();
  for (int64_t n = 1; n < p.rows(); ++n) top = top.max(p.row(n).array());
  p.array().rowwise() -= top;
  p.array() = p.array().exp();
  sums.setZero();
  for (int64_t n = 0; n < p.rows(); ++n) sums += p.row(n).array();
}

// Whether the heads of t [B, h, N, d] lie side by side in each token's row, d apart with unit
// stride along d (a token's C = h·d channels contiguous, as the qkv projection and the token-layout
// output hold them).
bool heads_side_by_side(const Strides4& s, int64_t d) { return s.s[3] == 1 && s.s[1] == d; }

// The forward for heads of kNarrow channels (CoaT-Lite's first stage: 64 channels, 8 heads), all
// heads of a sample at once. A head's N×8 slice is too narrow for the per-head kernel's products
// (a loop step and a part-filled register per token in every pass, and 2h GEMM calls of 8 columns);
// here each pass walks a sample's N×C rows once and the 8×8 products are fixed-size loops that
// the compiler keeps in registers.
constexpr int64_t kNarrow = 8;

template <class S>
void factor_attention_narrow(const S* qp, Strides4 qo, const S* kp, Strides4 ko, const S* vp, Strides4 vo, const S* cp,
                             Strides4 co, compute_t<S> sc, int64_t B, int64_t H, int64_t N, S* xp, compute_t<S>* lp,
                             S* yp, Strides4 yo) {
  using T = compute_t<S>;
  constexpr int64_t d = kNarrow;
  const int64_t C = H * d;
  parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    RowMatrix<T> p(N, C);
    ChannelRow<T> top(C), sums(C);
    std::vector<T> context(static_cast<size_t>(H * d * d));  // scale times each head's context
    RunIn<S> in_q, in_v;
    RunBuffer<S> cv_rows;
    RunOut<S> out_ctx, out_y;
    for (int64_t b = b0; b < b1; ++b) {
      // The sample's N×C rows of q, v and y as compute values, with their row strides.
      const T* qs = in_q.matrix(qp + qo.s[0] * b, N, C, qo.s[2]);
      const T* vs = in_v.matrix(vp + vo.s[0] * b, N, C, vo.s[2]);
      T* ys = out_y.matrix(yp + yo.s[0] * b, N, C, yo.s[2]);
      const int64_t q_ld = RunIn<S>::rows_stride(qo.s[2], C), v_ld = RunIn<S>::rows_stride(vo.s[2], C);
      const int64_t y_ld = RunIn<S>::rows_stride(yo.s[2], C);
      T* xs = out_ctx(xp + b * H * d * d, H * d * d);  // the sample's heads' contexts, contiguous
      // Eq. 3's softmax(K) over the tokens, per channel (left unnormalised).
      load_rows(kp + ko.s[0] * b, ko.s[2], p.data(), C, N, C);
      exp_over_columns(p, top, sums);
      Eigen::Map<ChannelRow<T>>(lp + b * C, C) = top + sums.log();
      // Each head's context softmax(K)ᵀ·V: its 8 rows as 8 fixed-size accumulators (a register
      // each) over the tokens; the rows divided by their channel's sum at the end (p was not
      // normalised), kept for the backward.
      using Lanes = Eigen::Array<T, d, 1>;
      for (int64_t h = 0; h < H; ++h) {
        Lanes acc[d];
        for (Lanes& a : acc) a.setZero();
        const T* vh = vs + h * d;
        const T* ph = p.data() + h * d;
        for (int64_t n = 0; n < N; ++n) {
          const Lanes vn = Eigen::Map<const Lanes>(vh + v_ld * n);
          for (int64_t i = 0; i < d; ++i) acc[i] += ph[n * C + i] * vn;
        }
        for (int64_t i = 0; i < d; ++i) {
          acc[i] /= sums[h * d + i];
          Eigen::Map<Lanes>(xs + (h * d + i) * d) = acc[i];
          Eigen::Map<Lanes>(context.data() + (h * d + i) * d) = acc[i] * sc;
        }
      }
      // Eq. 12: y = scale·q·context + q ⊙ cv on the image tokens (cv is [B, h, N−1, d] as
      // convolved), head by head with the head's scaled context in registers.
      for (int64_t h = 0; h < H; ++h) {
        Lanes rows_of[d];
        for (int64_t i = 0; i < d; ++i) rows_of[i] = Eigen::Map<const Lanes>(context.data() + (h * d + i) * d);
        const auto cvs = crpe_image_rows(cv_rows, cp, co, b, h, N - 1, d);
        const T* qh = qs + h * d;
        T* yh = ys + h * d;
        for (int64_t n = 0; n < N; ++n) {
          const T* qr = qh + q_ld * n;
          Lanes out = qr[0] * rows_of[0];
          for (int64_t i = 1; i < d; ++i) out += qr[i] * rows_of[i];
          if (n > 0)
            for (int64_t j = 0; j < d; ++j) out[j] += qr[j] * cvs(n - 1, j);
          Eigen::Map<Lanes>(yh + y_ld * n) = out;
        }
      }
      out_ctx.done();
      out_y.done();
    }
  });
}

}  // namespace

void factor_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cv, double scale,
                      const Tensor& ctx, const Tensor& lse, const Tensor& y) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), co = strides4(cv), yo = strides4(y);
  if (d == kNarrow && heads_side_by_side(qo, d) && heads_side_by_side(ko, d) && heads_side_by_side(vo, d) &&
      heads_side_by_side(yo, d)) {
    TS_DISPATCH_STORED(q.dtype(), "factor_attention", [&] {
      using S = storage_t;
      using T = compute_t<S>;
      factor_attention_narrow<S>(q.data<S>(), qo, k.data<S>(), ko, v.data<S>(), vo, cv.data<S>(), co,
                                 static_cast<T>(scale), B, H, N, ctx.data<S>(), lse.data<T>(), y.data<S>(), yo);
    });
    return;
  }
  TS_DISPATCH_STORED(q.dtype(), "factor_attention", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *qp = q.data<S>(), *kp = k.data<S>(), *vp = v.data<S>(), *cp = cv.data<S>();
    S *xp = ctx.data<S>(), *yp = y.data<S>();
    T* lp = lse.data<T>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      RowMatrix<T> p(N, d);
      ChannelRow<T> top(d), sums(d);
      RunIn<S> in_q, in_v;
      RunBuffer<S> cv_rows;
      RunOut<S> out_ctx, out_y;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const auto qs = head_slice(in_q, qp, qo, b, h, N, d);
        // Eq. 3's softmax(K) over the N tokens, per channel, on a dense copy of k's slice: the
        // columns' maxima and sums kept as log-sum-exps, so that the backward recomputes p
        // instead of storing it.
        load_head_slice(kp, ko, b, h, N, d, p);
        exp_over_columns(p, top, sums);
        p.array().rowwise() /= sums;
        Eigen::Map<ChannelRow<T>>(lp + r * d, d) = top + sums.log();
        // The d×d context softmax(K)ᵀV first (the factorization's point: no N×N map), then Eq. 12's
        // scale·Q·context plus the CRPE term Q_img ⊙ cv on the image tokens, in token layout (y
        // from the unrounded context: bfloat16 rounds only the stored ctx).
        SquareMap<T> context(out_ctx(xp + r * d * d, d * d), d, d);
        context.noalias() = p.transpose() * head_slice(in_v, vp, vo, b, h, N, d);
        auto ys = head_slice(out_y, yp, yo, b, h, N, d);
        ys.noalias() = qs * context;
        ys *= sc;
        ys.bottomRows(N - 1).array() +=
            qs.bottomRows(N - 1).array() * crpe_image_rows(cv_rows, cp, co, b, h, N - 1, d).array();
        out_ctx.done();
        out_y.done();
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
  TS_DISPATCH_STORED(q.dtype(), "factor_attention_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gp = g.data<S>(), *qp = q.data<S>(), *kp = k.data<S>(), *vp = v.data<S>(), *cp = cv.data<S>();
    const S* xp = ctx.data<S>();
    const T* lp = lse.data<T>();
    S *gqp = gq.data<S>(), *gkp = gk.data<S>(), *gvp = gv.data<S>(), *gcp = gcv.data<S>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      RowMatrix<T> p(N, d), gcontext(d, d);
      ChannelRow<T> dot(d);
      RunIn<S> in_g, in_q, in_v, in_ctx;
      RunBuffer<S> cv_rows;
      RunOut<S> out_gq, out_gk, out_gv, out_gcv;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const auto gs = head_slice(in_g, gp, go, b, h, N, d), qs = head_slice(in_q, qp, qo, b, h, N, d);
        const auto vs = head_slice(in_v, vp, vo, b, h, N, d);
        const auto cvs = crpe_image_rows(cv_rows, cp, co, b, h, N - 1, d);
        const CSquareMap<T> context(in_ctx(xp + r * d * d, d * d), d, d);
        load_head_slice(kp, ko, b, h, N, d, p);  // exp over p's dense storage (vectorised), as in the forward
        p.array().rowwise() -= Eigen::Map<const ChannelRow<T>>(lp + r * d, d);
        p.array() = p.array().exp();
        // Through y = scale·q·context + pad(q_img ⊙ cv): q's two terms, cv's, and the context's.
        auto gqs = head_slice(out_gq, gqp, gqo, b, h, N, d);
        gqs.noalias() = gs * context.transpose();
        gqs *= sc;
        gqs.bottomRows(N - 1).array() += gs.bottomRows(N - 1).array() * cvs.array();
        head_slice(out_gcv, gcp, gco, b, h, N - 1, d).array() =
            gs.bottomRows(N - 1).array() * qs.bottomRows(N - 1).array();
        gcontext.noalias() = qs.transpose() * gs;
        gcontext *= sc;
        // Through context = pᵀ·v: gv = p·gcontext, and softmax's backward over the tokens with its
        // row term Σ_n p_ni·(v·gcontextᵀ)_ni = Σ_c context_ic·gcontext_ic, no pass over the tokens.
        head_slice(out_gv, gvp, gvo, b, h, N, d).noalias() = p * gcontext;
        dot = (context.array() * gcontext.array()).rowwise().sum().transpose();
        auto gks = head_slice(out_gk, gkp, gko, b, h, N, d);
        gks.noalias() = vs * gcontext.transpose();
        gks.array() = (gks.array().rowwise() - dot) * p.array();
        for (RunOut<S>* out : {&out_gq, &out_gk, &out_gv, &out_gcv}) out->done();
      }
    });
  });
}

}  // namespace tessera::cpu
