// CPU kernels of factor_attention_merge (ops/kernels/factor_attention_merge.h): CoaT's attention
// output, rows (b, n) of the token-layout output in parallel.
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/kernels/factor_attention_merge.h"

namespace tessera::cpu {

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

}  // namespace tessera::cpu
