// CPU kernels of class_attention (ops/kernels/class_attention.h): one (sample, head) per task, as
// Eigen matrix-vector products.
// The front end passes k, v, gk and gv with unit stride along d, so each (sample, head) slice is an
// N x d row-major matrix with an outer stride (ops/cpu/head_slices.h): GEMVs that Eigen vectorises.
#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/head_slices.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/rows.h"
#include "tessera/ops/kernels/class_attention.h"

namespace tessera::cpu {

namespace {

template <class T>
using CStridedVec = Eigen::Map<const ColumnVec<T>, Eigen::Unaligned, Eigen::InnerStride<>>;
template <class T>
using StridedVec = Eigen::Map<ColumnVec<T>, Eigen::Unaligned, Eigen::InnerStride<>>;

// The d-vector at (b, h, 0) of a [B, h, 1, d] view.
template <class T>
CStridedVec<T> row(const T* base, const Strides4& st, int64_t b, int64_t h, int64_t d) {
  return CStridedVec<T>(base + st(b, h, 0, 0), d, Eigen::InnerStride<>(st.s[3]));
}

}  // namespace

void class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a,
                     const Tensor& y) {
  const int64_t B = k.size(0), H = k.size(1), N = k.size(2), d = k.size(3);
  const Strides4 qo = strides4(q), ko = strides4(k), vo = strides4(v), yo = strides4(y);
  TS_DISPATCH_FLOAT(k.dtype(), "class_attention", [&] {
    using T = scalar_t;
    const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>();
    T *ap = a.data<T>(), *yp = y.data<T>();
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        Eigen::Map<ColumnVec<T>> weights(ap + r * N, N);
        weights.noalias() = head_slice(kp, ko, b, h, N, d) * row(qp, qo, b, h, d);
        weights *= sc;
        weights = (weights.array() - weights.maxCoeff()).exp();
        weights /= weights.sum();
        StridedVec<T>(yp + yo(b, h, 0, 0), d, Eigen::InnerStride<>(yo.s[3])).noalias() =
            head_slice(vp, vo, b, h, N, d).transpose() * weights;
      }
    });
  });
}

void class_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                              double scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const int64_t B = k.size(0), H = k.size(1), N = k.size(2), d = k.size(3);
  const Strides4 go = strides4(g), qo = strides4(q), ko = strides4(k), vo = strides4(v);
  const Strides4 gqo = strides4(gq), gko = strides4(gk), gvo = strides4(gv);
  TS_DISPATCH_FLOAT(k.dtype(), "class_attention_backward", [&] {
    using T = scalar_t;
    const T *gp = g.data<T>(), *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>(), *ap = a.data<T>();
    T *gqp = mut_ptr_or_null<T>(gq), *gkp = mut_ptr_or_null<T>(gk), *gvp = mut_ptr_or_null<T>(gv);
    const T sc = static_cast<T>(scale);
    parallel_for(0, B * H, grain_for(N * d), [&](int64_t r0, int64_t r1) {
      ColumnVec<T> gz(N);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / H, h = r % H;
        const Eigen::Map<const ColumnVec<T>> weights(ap + r * N, N);
        const ColumnVec<T> grad = row(gp, go, b, h, d);
        gz.noalias() = head_slice(vp, vo, b, h, N, d) * grad;  // ga_n = g·v_n
        const T weighted = weights.dot(gz);                    // Σ_n a_n·ga_n
        gz = weights.array() * (gz.array() - weighted);        // softmax's backward
        if (gqp)
          StridedVec<T>(gqp + gqo(b, h, 0, 0), d, Eigen::InnerStride<>(gqo.s[3])).noalias() =
              sc * (head_slice(kp, ko, b, h, N, d).transpose() * gz);
        if (gkp) head_slice(gkp, gko, b, h, N, d).noalias() = (sc * gz) * row(qp, qo, b, h, d).transpose();
        if (gvp) head_slice(gvp, gvo, b, h, N, d).noalias() = weights * grad.transpose();
      }
    });
  });
}

}  // namespace tessera::cpu
