// CPU kernels of the fused ops (ops/kernels/fused.h): one pass over the rows for each, the
// per-column sums of the backward in fixed blocks of rows accumulated in double
// (ops/cpu/blocked_sums.h), so they do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/blocked_sums.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/unary_spans.h"

namespace tessera::cpu {

namespace {

template <class T> using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

struct Rows {
  int64_t rows, C, per_sample;
};
Rows rows_of(const Tensor& t, const Tensor& sample_scale) {
  const int64_t C = t.shape().back(), rows = t.numel() / C;
  return {rows, C, sample_scale.defined() ? rows / sample_scale.numel() : rows};
}

UnaryArgs gelu_args(bool approximate) { return {approximate ? UnaryOp::GeluTanh : UnaryOp::GeluErf}; }

}  // namespace

void layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                          const Tensor& y) {
  const Rows r = rows_of(x, sample_scale);
  TS_DISPATCH_FLOAT(x.dtype(), "layer_scale_residual", [&] {
    using T = scalar_t;
    const T *xp = x.data<T>(), *fp = f.data<T>(), *sp = ptr_or_null<T>(sample_scale);
    T* yp = y.data<T>();
    const CRow<T> g(gamma.data<T>(), r.C);
    parallel_for(0, r.rows, std::max<int64_t>(1, 16384 / r.C), [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        const T s = sp ? sp[i / r.per_sample] : T(1);
        Row<T>(yp + i * r.C, r.C) = CRow<T>(xp + i * r.C, r.C) + (s * g) * CRow<T>(fp + i * r.C, r.C);
      }
    });
  });
}

void layer_scale_residual_backward(const Tensor& g, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                                   const Tensor& gf, const Tensor& ggamma) {
  const Rows r = rows_of(f, sample_scale);
  TS_DISPATCH_FLOAT(f.dtype(), "layer_scale_residual_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *fp = f.data<T>(), *sp = ptr_or_null<T>(sample_scale);
    T* gfp = mut_ptr_or_null<T>(gf);
    const CRow<T> gam(gamma.data<T>(), r.C);
    const std::vector<double> sums = blocked_sums(r.rows, r.C, 1, [&](int64_t r0, int64_t r1, double* acc) {
      Eigen::Map<Eigen::ArrayXd> total(acc, r.C);
      for (int64_t i = r0; i < r1; ++i) {
        const T s = sp ? sp[i / r.per_sample] : T(1);
        const CRow<T> gi(gp + i * r.C, r.C);
        if (gfp) Row<T>(gfp + i * r.C, r.C) = (s * gam) * gi;
        if (ggamma.defined()) total += (s * gi * CRow<T>(fp + i * r.C, r.C)).template cast<double>();
      }
    });
    if (ggamma.defined())
      for (int64_t c = 0; c < r.C; ++c) ggamma.data<T>()[c] = static_cast<T>(sums[c]);
  });
}

void linear_gelu(const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& y) {
  const int64_t C = pre.shape().back(), rows = pre.numel() / C;
  TS_DISPATCH_FLOAT(pre.dtype(), "linear_gelu", [&] {
    using T = scalar_t;
    T *pp = pre.data<T>(), *yp = y.data<T>();
    const CRow<T> b(bias.data<T>(), C);
    parallel_for(0, rows, std::max<int64_t>(1, 8192 / C), [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        Row<T>(pp + i * C, C) += b;
        unary_span<T>(gelu_args(approximate), pp + i * C, yp + i * C, C);
      }
    });
  });
}

void linear_gelu_backward(const Tensor& g, const Tensor& pre, bool approximate, const Tensor& gpre,
                        const Tensor& gbias) {
  const int64_t C = pre.shape().back(), rows = pre.numel() / C;
  TS_DISPATCH_FLOAT(pre.dtype(), "linear_gelu_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *pp = pre.data<T>();
    T* out = gpre.data<T>();
    const std::vector<double> sums = blocked_sums(rows, C, 1, [&](int64_t r0, int64_t r1, double* acc) {
      Eigen::Map<Eigen::ArrayXd> total(acc, C);
      for (int64_t i = r0; i < r1; ++i) {
        // GELU's derivative reads x only; y is any same-shaped span (ops/kernels/elementwise.h).
        unary_backward_span<T>(gelu_args(approximate), pp + i * C, pp + i * C, gp + i * C, out + i * C, C);
        if (gbias.defined()) total += CRow<T>(out + i * C, C).template cast<double>();
      }
    });
    if (gbias.defined())
      for (int64_t c = 0; c < C; ++c) gbias.data<T>()[c] = static_cast<T>(sums[c]);
  });
}

// ---- XCA's map: one d×d matrix per task, rows in order (ops/kernels/fused.h) ------------------------

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
                             const Tensor& col_terms) {
  const CosineShape sh = cosine_shape(s, t);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map_backward", [&] {
    using T = scalar_t;
    const T *gap = ga.data<T>(), *ap = a.data<T>(), *sp = s.data<T>(), *qp = nq.data<T>(), *kp = nk.data<T>();
    const T* tp = t.data<T>();
    T *gsp = gs.data<T>(), *rp = row_terms.data<T>(), *cp = col_terms.data<T>();
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
          cols += (gz * c).template cast<double>();
        }
        for (int64_t j = 0; j < d; ++j) cp[m * d + j] = static_cast<T>(cols[j]);
      }
    });
  });
}

// ---- CoaT's attention output: rows (b, n) of the token-layout output in parallel -------------------

namespace {

// Rows of work per parallel_for chunk for rows of `per_row` elements: about 4096 elements a chunk.
int64_t grain_for(int64_t per_row) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(1, per_row)); }

}  // namespace

void factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale, const Tensor& y) {
  const int64_t B = m.size(0), H = m.size(1), N = m.size(2), d = m.size(3);
  const Strides4 mo = strides4(m), qo = strides4(q), co = strides4(cv);
  TS_DISPATCH_FLOAT(m.dtype(), "factor_attention_merge", [&] {
    using T = scalar_t;
    const T *mp = m.data<T>(), *qp = q.data<T>(), *cp = cv.data<T>();
    T* yp = y.data<T>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * N, grain_for(H * d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / N, n = r % N;
        T* yr = yp + r * H * d;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < d; ++c) {
            const T attended = mp[mo(b, h, n, c)] * sc;
            yr[h * d + c] = n == 0 ? attended : attended + qp[qo(b, h, n, c)] * cp[co(b, h, n - 1, c)];
          }
      }
    });
  });
}

void factor_attention_merge_backward(const Tensor& g, const Tensor& q, const Tensor& cv, double scale, const Tensor& gm,
                                     const Tensor& gq, const Tensor& gcv) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 qo = strides4(q), co = strides4(cv);
  TS_DISPATCH_FLOAT(q.dtype(), "factor_attention_merge_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *qp = q.data<T>(), *cp = cv.data<T>();
    T *gmp = mut_ptr_or_null<T>(gm), *gqp = mut_ptr_or_null<T>(gq), *gcp = mut_ptr_or_null<T>(gcv);
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * N, grain_for(H * d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / N, n = r % N;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < d; ++c) {
            const T gv = gp[r * H * d + h * d + c];
            const int64_t at = ((b * H + h) * N + n) * d + c;  // [B, h, N, d] contiguous
            if (gmp) gmp[at] = gv * sc;
            if (gqp) gqp[at] = n == 0 ? T(0) : gv * cp[co(b, h, n - 1, c)];
            if (gcp && n > 0) gcp[((b * H + h) * (N - 1) + n - 1) * d + c] = gv * qp[qo(b, h, n, c)];
          }
      }
    });
  });
}

// ---- class attention: one (sample, head) per task, as Eigen matrix-vector products ----------------
// The front end passes k, v, gk and gv with unit stride along d, so each (sample, head) slice is an
// N x d row-major matrix with an outer stride: GEMVs that Eigen vectorises.

namespace {

template <class T> using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T> using SliceMap =
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T> using CSliceMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
                                                Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T> using CStridedVec = Eigen::Map<const Vec<T>, Eigen::Unaligned, Eigen::InnerStride<>>;
template <class T> using StridedVec = Eigen::Map<Vec<T>, Eigen::Unaligned, Eigen::InnerStride<>>;

// Slice (b, h) of a [B, h, N, d] view with unit stride along d, as an N x d matrix.
template <class T>
CSliceMap<T> slice(const T* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d) {
  return CSliceMap<T>(base + st(b, h, 0, 0), N, d, Eigen::OuterStride<>(N > 1 ? st.s[2] : d));
}
template <class T>
SliceMap<T> slice(T* base, const Strides4& st, int64_t b, int64_t h, int64_t N, int64_t d) {
  return SliceMap<T>(base + st(b, h, 0, 0), N, d, Eigen::OuterStride<>(N > 1 ? st.s[2] : d));
}
// The d-vector at (b, h, 0) of a [B, h, 1, d] view.
template <class T>
CStridedVec<T> row(const T* base, const Strides4& st, int64_t b, int64_t h, int64_t d) {
  return CStridedVec<T>(base + st(b, h, 0, 0), d, Eigen::InnerStride<>(st.s[3]));
}

}  // namespace

void class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a, const Tensor& y) {
  const int64_t B = k.size(0), H = k.size(1), N = k.size(2), d = k.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), yo = strides4(y);
  TS_DISPATCH_FLOAT(k.dtype(), "class_attention", [&] {
    using T = scalar_t;
    const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>();
    T *ap = a.data<T>(), *yp = y.data<T>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        Eigen::Map<Vec<T>> weights(ap + r * N, N);
        weights.noalias() = slice(kp, ko, b, h, N, d) * row(qp, qo, b, h, d);
        weights *= sc;
        weights = (weights.array() - weights.maxCoeff()).exp();
        weights /= weights.sum();
        StridedVec<T>(yp + yo(b, h, 0, 0), d, Eigen::InnerStride<>(yo.s[3])).noalias() =
            slice(vp, vo, b, h, N, d).transpose() * weights;
      }
    });
  });
}

void class_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                              double scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const int64_t B = k.size(0), H = k.size(1), N = k.size(2), d = k.size(3);
  const Strides4 go = strides4(g), qo = strides4(q), ko = strides4(k), vo = strides4(v);
  const Strides4 gqo = strides4(gq), gko = strides4(gk), gvo = strides4(gv);
  TS_DISPATCH_FLOAT(k.dtype(), "class_attention_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *ap = a.data<T>();
    T *gqp = mut_ptr_or_null<T>(gq), *gkp = mut_ptr_or_null<T>(gk), *gvp = mut_ptr_or_null<T>(gv);
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      Vec<T> gz(N);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const Eigen::Map<const Vec<T>> weights(ap + r * N, N);
        const Vec<T> grad = row(gp, go, b, h, d);
        gz.noalias() = slice(vp, vo, b, h, N, d) * grad;            // ga_n = g·v_n
        const T weighted = weights.dot(gz);                         // Σ_n a_n·ga_n
        gz = weights.array() * (gz.array() - weighted);             // softmax's backward
        if (gqp)
          StridedVec<T>(gqp + gqo(b, h, 0, 0), d, Eigen::InnerStride<>(gqo.s[3])).noalias() =
              sc * (slice(kp, ko, b, h, N, d).transpose() * gz);
        if (gkp) slice(gkp, gko, b, h, N, d).noalias() = (sc * gz) * row(qp, qo, b, h, d).transpose();
        if (gvp) slice(gvp, gvo, b, h, N, d).noalias() = weights * grad.transpose();
      }
    });
  });
}

// ---- UFO-ViT's XNorm of the queries: rows (b, h, n) in parallel --------------------------------------

void xnorm_matmul(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y) {
  const int64_t B = p.size(0), H = p.size(1), N = p.size(2), e = p.size(3);
  const Strides4 yo = strides4(y);
  TS_DISPATCH_FLOAT(p.dtype(), "xnorm_matmul", [&] {
    using T = scalar_t;
    const T *pp = p.data<T>(), *np = nq.data<T>(), *gp = gamma.data<T>();
    T* yp = y.data<T>();
    const T floor = static_cast<T>(eps);
    parallel_for(0, B * H * N, grain_for(e), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (H * N), h = r / N % H, n = r % N;
        const T factor = gp[h] / std::max(np[r], floor);
        for (int64_t c = 0; c < e; ++c) yp[yo(b, h, n, c)] = factor * pp[r * e + c];
      }
    });
  });
}

void xnorm_matmul_backward(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps,
                             const Tensor& gp, const Tensor& row_terms) {
  const int64_t B = p.size(0), H = p.size(1), N = p.size(2), e = p.size(3);
  const Strides4 go = strides4(g);
  TS_DISPATCH_FLOAT(p.dtype(), "xnorm_matmul_backward", [&] {
    using T = scalar_t;
    const T *gradp = g.data<T>(), *pp = p.data<T>(), *np = nq.data<T>(), *gammap = gamma.data<T>();
    T *gpp = gp.data<T>(), *rp = row_terms.data<T>();
    const T floor = static_cast<T>(eps);
    parallel_for(0, B * H * N, grain_for(e), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (H * N), h = r / N % H, n = r % N;
        const T norm = std::max(np[r], floor), factor = gammap[h] / norm;
        T acc = 0;
        for (int64_t c = 0; c < e; ++c) {
          const T gv = gradp[go(b, h, n, c)];
          gpp[r * e + c] = factor * gv;
          acc += gv * pp[r * e + c];
        }
        rp[r] = acc / norm;
      }
    });
  });
}

}  // namespace tessera::cpu
