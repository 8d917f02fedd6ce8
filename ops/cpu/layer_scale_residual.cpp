// CPU kernels of layer_scale_residual (ops/kernels/layer_scale_residual.h): one pass over the rows,
// the per-column sums of the backward in fixed blocks of rows accumulated in double
// (ops/cpu/blocked_sums.h), so they do not depend on the thread count. x, f and their gradients are
// stored activations (bfloat16 rows converted one at a time, ops/cpu/storage.h); gamma, the
// per-sample scale and gamma's gradient are compute-type parameters.
#include <algorithm>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/blocked_sums.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/layer_scale_residual.h"

namespace tessera::cpu {

void layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                          const Tensor& y) {
  const RowLayout r = row_layout(x, sample_scale);
  TS_DISPATCH_STORED(x.dtype(), "layer_scale_residual", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *xp = x.data<S>(), *fp = f.data<S>();
    const T* sp = ptr_or_null<T>(sample_scale);
    S* yp = y.data<S>();
    const CRow<T> g(gamma.data<T>(), r.C);
    parallel_for(0, r.rows, std::max<int64_t>(1, 16384 / r.C), [&](int64_t r0, int64_t r1) {
      RunIn<S> in_x, in_f;
      RunOut<S> out;
      for_row_blocks(r0, r1, r.C, [&](int64_t first, int64_t count) {
        const int64_t at = first * r.C, n = count * r.C;
        const T *xb = in_x(xp + at, n), *fb = in_f(fp + at, n);
        T* yb = out(yp + at, n);
        for (int64_t k = 0, i = first; k < count; ++k, ++i) {
          const T s = sp ? sp[i / r.per_sample] : T(1);
          Row<T>(yb + k * r.C, r.C) = CRow<T>(xb + k * r.C, r.C) + (s * g) * CRow<T>(fb + k * r.C, r.C);
        }
        out.done();
      });
    });
  });
}

void layer_scale_residual_backward(const Tensor& g, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                                   const Tensor& gf, const Tensor& ggamma) {
  const RowLayout r = row_layout(f, sample_scale);
  TS_DISPATCH_STORED(f.dtype(), "layer_scale_residual_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gp = g.data<S>(), *fp = f.data<S>();
    const T* sp = ptr_or_null<T>(sample_scale);
    S* gfp = mut_ptr_or_null<S>(gf);
    const CRow<T> gam(gamma.data<T>(), r.C);
    const std::vector<double> sums = blocked_sums(r.rows, r.C, 1, [&](int64_t r0, int64_t r1, double* acc) {
      Eigen::Map<Eigen::ArrayXd> total(acc, r.C);
      RunIn<S> in_g, in_f;
      RunOut<S> out;
      for_row_blocks(r0, r1, r.C, [&](int64_t first, int64_t count) {
        const int64_t at = first * r.C, n = count * r.C;
        const T* gb = in_g(gp + at, n);
        const T* fb = ggamma.defined() ? in_f(fp + at, n) : nullptr;
        T* gfb = gfp ? out(gfp + at, n) : nullptr;
        for (int64_t k = 0, i = first; k < count; ++k, ++i) {
          const T s = sp ? sp[i / r.per_sample] : T(1);
          const CRow<T> gi(gb + k * r.C, r.C);
          if (gfb) Row<T>(gfb + k * r.C, r.C) = (s * gam) * gi;
          if (fb) total += (s * gi * CRow<T>(fb + k * r.C, r.C)).template cast<double>();
        }
        if (gfb) out.done();
      });
    });
    if (ggamma.defined())
      for (int64_t c = 0; c < r.C; ++c) ggamma.data<T>()[c] = static_cast<T>(sums[c]);
  });
}

}  // namespace tessera::cpu
