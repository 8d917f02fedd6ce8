// CPU kernels of linear_gelu (ops/kernels/linear_gelu.h): the forward's GEMM in row panels, each
// finished (bias, GELU) while it is in cache (ops/cpu/gemm.h gemm_row_panels); the per-column sums
// of the backward in fixed blocks of rows accumulated in double (ops/cpu/blocked_sums.h), so they
// do not depend on the thread count.
#include <algorithm>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/blocked_sums.h"
#include "tessera/ops/cpu/gemm.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/unary_spans.h"
#include "tessera/ops/kernels/linalg.h"
#include "tessera/ops/kernels/linear_gelu.h"

namespace tessera::cpu {

void linear_gelu(const Tensor& x, const Tensor& wt, const Tensor& bias, bool approximate, const Tensor& pre,
                 const Tensor& y) {
  const int64_t C = y.size(1), rows = y.size(0);
  if (y.numel() == 0) return;
  TS_DISPATCH_FLOAT(y.dtype(), "linear_gelu", [&] {
    using T = scalar_t;
    T* yp = y.data<T>();
    T* product = pre.defined() ? pre.data<T>() : yp;
    const CRow<T> b(bias.data<T>(), C);
    const MatrixLayout lx = *matrix_layout(x), lw = *matrix_layout(wt);
    const GemmDesc desc{lx.transposed, lw.transposed, rows, C, x.size(1), lx.ld, lw.ld, C};
    // Each panel of rows: h = product + b in y's rows, then GELU in place (element by element, so
    // the aliasing is safe, also when the product is y's own rows).
    gemm_row_panels<T>(desc, x.data<T>(), wt.data<T>(), product, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        Row<T>(yp + i * C, C) = CRow<T>(product + i * C, C) + b;
        unary_span<T>(gelu_args(approximate), yp + i * C, yp + i * C, C);
      }
    });
  });
}

void linear_gelu_backward(const Tensor& g, const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& gpre,
                          const Tensor& gbias) {
  const int64_t C = pre.shape().back(), rows = pre.numel() / C;
  TS_DISPATCH_FLOAT(pre.dtype(), "linear_gelu_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *pp = pre.data<T>();
    T* out = gpre.data<T>();
    const CRow<T> b(bias.data<T>(), C);
    const std::vector<double> sums = blocked_sums(rows, C, 1, [&](int64_t r0, int64_t r1, double* acc) {
      Eigen::Map<Eigen::ArrayXd> total(acc, C);
      for (int64_t i = r0; i < r1; ++i) {
        // h as the forward made it, in gpre's row; GELU's derivative reads x only, so y may be any
        // same-shaped span (ops/kernels/elementwise.h), and it is computed in place element by element.
        Row<T>(out + i * C, C) = CRow<T>(pp + i * C, C) + b;
        unary_backward_span<T>(gelu_args(approximate), out + i * C, out + i * C, gp + i * C, out + i * C, C);
        if (gbias.defined()) total += CRow<T>(out + i * C, C).template cast<double>();
      }
    });
    if (gbias.defined())
      for (int64_t c = 0; c < C; ++c) gbias.data<T>()[c] = static_cast<T>(sums[c]);
  });
}

}  // namespace tessera::cpu
