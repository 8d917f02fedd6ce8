// CPU kernels of layer_scale_residual (ops/kernels/layer_scale_residual.h): one pass over the rows,
// the per-column sums of the backward in fixed blocks of rows accumulated in double
// (ops/cpu/blocked_sums.h), so they do not depend on the thread count.
#include <algorithm>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/blocked_sums.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/kernels/layer_scale_residual.h"

namespace tessera::cpu {

void layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                          const Tensor& y) {
  const RowLayout r = row_layout(x, sample_scale);
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
  const RowLayout r = row_layout(f, sample_scale);
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

}  // namespace tessera::cpu
