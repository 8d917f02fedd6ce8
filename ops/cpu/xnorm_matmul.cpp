// CPU kernels of xnorm_matmul (ops/kernels/xnorm_matmul.h): UFO-ViT's XNorm of the queries, rows
// (b, h, n) in parallel. p, nq, y, the gradients and the row terms are activations (S), gamma a
// compute-type parameter (as on cuda); bfloat16 activations are converted a row at a time.
#include <algorithm>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/xnorm_matmul.h"

namespace tessera::cpu {

void xnorm_matmul(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y) {
  const int64_t B = p.size(0), H = p.size(1), N = p.size(2), e = p.size(3);
  const Strides4 yo = strides4(y);
  TS_DISPATCH_STORED(p.dtype(), "xnorm_matmul", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *pp = p.data<S>(), *np = nq.data<S>();
    const T* gp = gamma.data<T>();
    S* yp = y.data<S>();
    const T floor = static_cast<T>(eps);
    const int64_t ys = head_row_stride<S>(yo);
    parallel_for(0, B * H * N, grain_for(e), [&](int64_t r0, int64_t r1) {
      RunIn<S> in_p, in_n;
      RunOut<S> out_y;
      const T* norms = in_n(np + r0, r1 - r0);  // the task's rows' norms
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (H * N), h = r / N % H, n = r % N;
        const T factor = gp[h] / std::max(norms[r - r0], floor);
        const T* pr = in_p(pp + r * e, e);
        T* yr = head_row(out_y, yp, yo, b, h, n, e);
        for (int64_t c = 0; c < e; ++c) yr[c * ys] = factor * pr[c];
        out_y.done();
      }
    });
  });
}

void xnorm_matmul_backward(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps,
                           const Tensor& gp, const Tensor& row_terms) {
  const int64_t B = p.size(0), H = p.size(1), N = p.size(2), e = p.size(3);
  const Strides4 go = strides4(g);
  TS_DISPATCH_STORED(p.dtype(), "xnorm_matmul_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gradp = g.data<S>(), *pp = p.data<S>(), *np = nq.data<S>();
    const T* gammap = gamma.data<T>();
    S *gpp = gp.data<S>(), *rp = row_terms.data<S>();
    const T floor = static_cast<T>(eps);
    const int64_t gs = head_row_stride<S>(go);
    parallel_for(0, B * H * N, grain_for(e), [&](int64_t r0, int64_t r1) {
      RunIn<S> in_g, in_p, in_n;
      RunOut<S> out_gp, out_rows;
      const T* norms = in_n(np + r0, r1 - r0);
      T* terms = out_rows(rp + r0, r1 - r0);  // the task's row terms, stored once at the end
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (H * N), h = r / N % H, n = r % N;
        const T norm = std::max(norms[r - r0], floor), factor = gammap[h] / norm;
        const T *gr = head_row(in_g, gradp, go, b, h, n, e), *pr = in_p(pp + r * e, e);
        T* gpr = out_gp(gpp + r * e, e);
        T acc = 0;
        for (int64_t c = 0; c < e; ++c) {
          const T gv = gr[c * gs];
          gpr[c] = factor * gv;
          acc += gv * pr[c];
        }
        out_gp.done();
        terms[r - r0] = acc / norm;
      }
      out_rows.done();
    });
  });
}

}  // namespace tessera::cpu
