// CPU kernels of factor_attention_merge (ops/kernels/factor_attention_merge.h): CoaT's attention
// output, rows (b, n) of the token-layout output in parallel. Every operand is an activation (S);
// bfloat16 rows are converted a run at a time, the strided ones read a value at a time.
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/factor_attention_merge.h"

namespace tessera::cpu {

void factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale, const Tensor& y) {
  const int64_t B = m.size(0), H = m.size(1), N = m.size(2), d = m.size(3);
  const Strides4 mo = strides4(m), qo = strides4(q), co = strides4(cv);
  TS_DISPATCH_STORED(m.dtype(), "factor_attention_merge", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *mp = m.data<S>(), *qp = q.data<S>(), *cp = cv.data<S>();
    S* yp = y.data<S>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * N, grain_for(H * d), [&](int64_t r0, int64_t r1) {
      RunOut<S> out;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / N, n = r % N;
        T* yr = out(yp + r * H * d, H * d);
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < d; ++c) {
            const T attended = value(mp[mo(b, h, n, c)]) * sc;
            yr[h * d + c] = n == 0 ? attended : attended + value(qp[qo(b, h, n, c)]) * value(cp[co(b, h, n - 1, c)]);
          }
        out.done();
      }
    });
  });
}

void factor_attention_merge_backward(const Tensor& g, const Tensor& q, const Tensor& cv, double scale, const Tensor& gm,
                                     const Tensor& gq, const Tensor& gcv) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  const Strides4 qo = strides4(q), co = strides4(cv);
  TS_DISPATCH_STORED(q.dtype(), "factor_attention_merge_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gp = g.data<S>(), *qp = q.data<S>(), *cp = cv.data<S>();
    S *gmp = mut_ptr_or_null<S>(gm), *gqp = mut_ptr_or_null<S>(gq), *gcp = mut_ptr_or_null<S>(gcv);
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * N, grain_for(H * d), [&](int64_t r0, int64_t r1) {
      RunIn<S> in;
      RunOut<S> out_m, out_q, out_cv;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / N, n = r % N;
        const T* gr = in(gp + r * H * d, H * d);
        for (int64_t h = 0; h < H; ++h) {
          const int64_t at = ((b * H + h) * N + n) * d;  // [B, h, N, d] contiguous
          // Each output's d values of (b, h, n), if it is wanted (gcv has none at n = 0).
          T* gmr = gmp ? out_m(gmp + at, d) : nullptr;
          T* gqr = gqp ? out_q(gqp + at, d) : nullptr;
          T* gcr = gcp && n > 0 ? out_cv(gcp + ((b * H + h) * (N - 1) + n - 1) * d, d) : nullptr;
          for (int64_t c = 0; c < d; ++c) {
            const T gv = gr[h * d + c];
            if (gmr) gmr[c] = gv * sc;
            if (gqr) gqr[c] = n == 0 ? T(0) : gv * value(cp[co(b, h, n - 1, c)]);
            if (gcr) gcr[c] = gv * value(qp[qo(b, h, n, c)]);
          }
          if (gmr) out_m.done();
          if (gqr) out_q.done();
          if (gcr) out_cv.done();
        }
      }
    });
  });
}

}  // namespace tessera::cpu
