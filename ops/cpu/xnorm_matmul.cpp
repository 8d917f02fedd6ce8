// CPU kernels of xnorm_matmul (ops/kernels/xnorm_matmul.h): UFO-ViT's XNorm of the queries, rows
// (b, h, n) in parallel.
#include <algorithm>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/kernels/xnorm_matmul.h"

namespace tessera::cpu {

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
