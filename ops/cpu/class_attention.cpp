// CPU kernels of class_attention (ops/kernels/class_attention.h): one (sample, head) per task, as
// Eigen matrix-vector products.
// The front end passes k, v, gk and gv with unit stride along d, so each (sample, head) slice is an
// N x d row-major matrix with an outer stride (ops/cpu/head_slices.h): GEMVs that Eigen vectorises.
// Every operand is an activation (S); bfloat16 ones are converted a slice at a time.
#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/class_attention.h"

namespace tessera::cpu {

namespace {

template <class T>
using CStridedVec = Eigen::Map<const ColumnVec<T>, Eigen::Unaligned, Eigen::InnerStride<>>;
template <class T>
using StridedVec = Eigen::Map<ColumnVec<T>, Eigen::Unaligned, Eigen::InnerStride<>>;

// The d-vector at (b, h, 0) of a [B, h, 1, d] view, read through `in` or written through `out`.
template <class S>
CStridedVec<compute_t<S>> row(RunIn<S>& in, const S* base, const Strides4& st, int64_t b, int64_t h, int64_t d) {
  return CStridedVec<compute_t<S>>(head_row(in, base, st, b, h, 0, d), d, Eigen::InnerStride<>(head_row_stride<S>(st)));
}
template <class S>
StridedVec<compute_t<S>> row(RunOut<S>& out, S* base, const Strides4& st, int64_t b, int64_t h, int64_t d) {
  return StridedVec<compute_t<S>>(head_row(out, base, st, b, h, 0, d), d, Eigen::InnerStride<>(head_row_stride<S>(st)));
}

}  // namespace

void class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a,
                     const Tensor& y) {
  const int64_t B = k.size(0), H = k.size(1), N = k.size(2), d = k.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), yo = strides4(y);
  TS_DISPATCH_STORED(k.dtype(), "class_attention", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *qp = q.data<S>(), *kp = k.data<S>(), *vp = v.data<S>();
    S *ap = a.data<S>(), *yp = y.data<S>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      RunIn<S> in_q, in_k, in_v;
      RunOut<S> out_a, out_y;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        Eigen::Map<ColumnVec<T>> weights(out_a(ap + r * N, N), N);
        weights.noalias() = head_slice(in_k, kp, ko, b, h, N, d) * row(in_q, qp, qo, b, h, d);
        weights *= sc;
        weights = (weights.array() - weights.maxCoeff()).exp();
        weights /= weights.sum();
        // y from the unrounded weights (bfloat16 rounds only the stored a).
        row(out_y, yp, yo, b, h, d).noalias() = head_slice(in_v, vp, vo, b, h, N, d).transpose() * weights;
        out_a.done();
        out_y.done();
      }
    });
  });
}

void class_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                              double scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const int64_t B = k.size(0), H = k.size(1), N = k.size(2), d = k.size(3);
  const Strides4 go = strides4(g), qo = strides4(q), ko = strides4(k), vo = strides4(v);
  const Strides4 gqo = strides4(gq), gko = strides4(gk), gvo = strides4(gv);
  TS_DISPATCH_STORED(k.dtype(), "class_attention_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *gp = g.data<S>(), *qp = q.data<S>(), *kp = k.data<S>(), *vp = v.data<S>(), *ap = a.data<S>();
    S *gqp = mut_ptr_or_null<S>(gq), *gkp = mut_ptr_or_null<S>(gk), *gvp = mut_ptr_or_null<S>(gv);
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      ColumnVec<T> gz(N);
      RunIn<S> in_g, in_q, in_k, in_v, in_a;
      RunOut<S> out_gq, out_gk, out_gv;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const Eigen::Map<const ColumnVec<T>> weights(in_a(ap + r * N, N), N);
        const ColumnVec<T> grad = row(in_g, gp, go, b, h, d);
        gz.noalias() = head_slice(in_v, vp, vo, b, h, N, d) * grad;  // ga_n = g·v_n
        const T weighted = weights.dot(gz);                          // Σ_n a_n·ga_n
        gz = weights.array() * (gz.array() - weighted);              // softmax's backward
        if (gqp) {
          row(out_gq, gqp, gqo, b, h, d).noalias() = sc * (head_slice(in_k, kp, ko, b, h, N, d).transpose() * gz);
          out_gq.done();
        }
        if (gkp) {
          head_slice(out_gk, gkp, gko, b, h, N, d).noalias() = (sc * gz) * row(in_q, qp, qo, b, h, d).transpose();
          out_gk.done();
        }
        if (gvp) {
          head_slice(out_gv, gvp, gvo, b, h, N, d).noalias() = weights * grad.transpose();
          out_gv.done();
        }
      }
    });
  });
}

}  // namespace tessera::cpu
