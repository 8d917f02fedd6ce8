// CPU kernels of linear_gelu (ops/kernels/linear_gelu.h): the forward's GEMM in row panels, each
// finished (bias, GELU) while it is in cache (ops/cpu/gemm.h gemm_row_panels), or in bfloat16
// inference one GEMM with bias and GELU in its epilogue; the per-column sums
// of the backward in fixed blocks of rows accumulated in double (ops/cpu/blocked_sums.h), so they
// do not depend on the thread count. bfloat16 rows are converted one at a time (ops/cpu/storage.h),
// the GEMM is the bfloat16 one (ops/cpu/gemm_bf16.cpp).
#include <algorithm>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/blocked_sums.h"
#include "tessera/ops/cpu/gemm.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/cpu/unary_spans.h"
#include "tessera/ops/kernels/linalg.h"
#include "tessera/ops/kernels/linear_gelu.h"

namespace tessera::cpu {

namespace {

// Inference (no pre to keep) in bfloat16: the bias and GELU in the bfloat16 GEMM's epilogue, y
// rounded once from the float32 sums (no backward reads its bits). False for the other storage
// types, whose GEMMs take their epilogue in row panels below.
template <class S>
bool gemm_with_gelu_epilogue(const GemmDesc& desc, const S* x, const S* wt, const compute_t<S>* bias, bool approximate,
                             S* y) {
  if constexpr (!kConverted<S>) {
    return false;
  } else {
    gemm_bf16<S>(desc, x, wt, 0.0f, y,
                 {nullptr, bias, approximate ? GemmEpilogue::Gelu::Tanh : GemmEpilogue::Gelu::Erf});
    return true;
  }
}

}  // namespace

void linear_gelu(const Tensor& x, const Tensor& wt, const Tensor& bias, bool approximate, const Tensor& pre,
                 const Tensor& y) {
  const int64_t C = y.size(1), rows = y.size(0);
  if (y.numel() == 0) return;
  TS_DISPATCH_STORED(y.dtype(), "linear_gelu", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    S* yp = y.data<S>();
    S* product = pre.defined() ? pre.data<S>() : yp;
    const CRow<T> b(bias.data<T>(), C);
    const MatrixLayout lx = *matrix_layout(x), lw = *matrix_layout(wt);
    const GemmDesc desc{lx.transposed, lw.transposed, rows, C, x.size(1), lx.ld, lw.ld, C};
    if (!pre.defined() && gemm_with_gelu_epilogue<S>(desc, x.data<S>(), wt.data<S>(), bias.data<T>(), approximate, yp))
      return;
    // Each panel of rows: h = product + b rounded to y's dtype (the bits the backward makes again
    // from pre), then GELU (element by element, so the aliasing is safe, also when the product is
    // y's own rows).
    gemm_row_panels<S>(desc, x.data<S>(), wt.data<S>(), product, [&](int64_t r0, int64_t r1) {
      RunIn<S> in;
      RunOut<S> out;
      for_row_blocks(r0, r1, C, [&](int64_t first, int64_t count) {
        const T* p = in(product + first * C, count * C);
        T* h = out(yp + first * C, count * C);
        for (int64_t k = 0; k < count; ++k) Row<T>(h + k * C, C) = CRow<T>(p + k * C, C) + b;
        round_to_storage<S>(h, count * C);
        unary_span<T>(gelu_args(approximate), h, h, count * C);
        out.done();
      });
    });
  });
}

void linear_gelu_backward(const Tensor& g, const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& gpre,
                          const Tensor& gbias) {
  const int64_t C = pre.shape().back(), rows = pre.numel() / C;
  TS_DISPATCH_STORED(pre.dtype(), "linear_gelu_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gp = g.data<S>(), *pp = pre.data<S>();
    S* out = gpre.data<S>();
    const CRow<T> b(bias.data<T>(), C);
    const std::vector<double> sums = blocked_sums(rows, C, 1, [&](int64_t r0, int64_t r1, double* acc) {
      Eigen::Map<Eigen::ArrayXd> total(acc, C);
      RunIn<S> in_pre, in_g;
      RunOut<S> out_g;
      for_row_blocks(r0, r1, C, [&](int64_t first, int64_t count) {
        // h as the forward made it, in gpre's rows; GELU's derivative reads x only, so y may be any
        // same-shaped span (ops/kernels/elementwise.h), and it is computed in place element by element.
        const int64_t at = first * C, n = count * C;
        T* h = out_g(out + at, n);
        const T* p = in_pre(pp + at, n);
        for (int64_t k = 0; k < count; ++k) Row<T>(h + k * C, C) = CRow<T>(p + k * C, C) + b;
        round_to_storage<S>(h, n);
        unary_backward_span<T>(gelu_args(approximate), h, h, in_g(gp + at, n), h, n);
        if (gbias.defined())
          for (int64_t k = 0; k < count; ++k) total += CRow<T>(h + k * C, C).template cast<double>();
        out_g.done();
      });
    });
    if (gbias.defined())
      for (int64_t c = 0; c < C; ++c) gbias.data<T>()[c] = static_cast<T>(sums[c]);
  });
}

}  // namespace tessera::cpu
