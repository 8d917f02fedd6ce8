// CPU fused softmax cross-entropy (formulas in ops/kernels/loss.h), one row of C logits at a time.
// With m = max_c x_c and se = Σ_c exp(x_c − m), lse − x_c is formed as (m − x_c) + log se so that
// large logits do not cancel.
#include <cmath>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/kernels/loss.h"

namespace tessera {

namespace {

template <class T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using CCol = Eigen::Map<const Vec<T>>;
template <class T>
using Col = Eigen::Map<Vec<T>>;

// Runs f(row) over the N rows of [N, C] in parallel.
template <class F>
void for_rows(int64_t N, int64_t C, const F& f) {
  parallel_for(0, N, std::max<int64_t>(1, 16384 / C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) f(r);
  });
}

template <class T>
void forward(const Tensor& logits, const Tensor& target, double eps, const Tensor& loss, const Tensor& lse) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  const T* xp = logits.data<T>();
  const bool hard = target.dtype() == DType::Int64;
  const int64_t* tp = hard ? target.data<int64_t>() : nullptr;
  const T* qp = hard ? nullptr : target.data<T>();
  T* lp = loss.data<T>();
  T* sp = lse.data<T>();
  for_rows(N, C, [&](int64_t r) {
    CCol<T> x(xp + r * C, C);
    const T m = x.maxCoeff();
    const T log_se = std::log((x - m).exp().sum());
    sp[r] = m + log_se;
    if (hard) {  // (1−ε)(lse − x_t) + ε(lse − mean x)
      const T e = T(eps);
      lp[r] = log_se + (T(1) - e) * (m - x[tp[r]]) + (e > T(0) ? e * (m - x.mean()) : T(0));
    } else {  // Σq·lse − Σq·x
      CCol<T> q(qp + r * C, C);
      lp[r] = q.sum() * log_se + (q * (m - x)).sum();
    }
  });
}

template <class T>
void backward(const Tensor& logits, const Tensor& target, const Tensor& lse, double eps, const Tensor& grad_scale,
              const Tensor& gx) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  const T* xp = logits.data<T>();
  const bool hard = target.dtype() == DType::Int64;
  const int64_t* tp = hard ? target.data<int64_t>() : nullptr;
  const T* qp = hard ? nullptr : target.data<T>();
  const T* sp = lse.data<T>();
  const T scale = *grad_scale.data<T>();
  T* gp = gx.data<T>();
  for_rows(N, C, [&](int64_t r) {
    CCol<T> x(xp + r * C, C);
    Col<T> g(gp + r * C, C);
    if (hard) {
      g = scale * ((x - sp[r]).exp() - T(eps / static_cast<double>(C)));
      g[tp[r]] -= scale * T(1.0 - eps);
    } else {
      CCol<T> q(qp + r * C, C);
      g = scale * (q.sum() * (x - sp[r]).exp() - q);
    }
  });
}

}  // namespace

namespace cpu {

void cross_entropy(const Tensor& logits, const Tensor& target, double eps, const Tensor& loss, const Tensor& lse) {
  TS_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] { forward<scalar_t>(logits, target, eps, loss, lse); });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, double eps,
                            const Tensor& grad_scale, const Tensor& gx) {
  TS_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward",
                    [&] { backward<scalar_t>(logits, target, lse, eps, grad_scale, gx); });
}

}  // namespace cpu

}  // namespace tessera
