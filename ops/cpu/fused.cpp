// CPU kernels of the fused ops (ops/kernels/fused.h): one pass over the rows for each, the
// per-column sums of the backward in fixed blocks of rows accumulated in double
// (ops/cpu/blocked_sums.h), so they do not depend on the thread count.
#include <Eigen/Core>

#include "ops/cpu/blocked_sums.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/optional_ptr.h"
#include "ops/cpu/unary_spans.h"

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

void bias_gelu(const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& y) {
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

void bias_gelu_backward(const Tensor& g, const Tensor& pre, bool approximate, const Tensor& gpre,
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

}  // namespace tessera::cpu
