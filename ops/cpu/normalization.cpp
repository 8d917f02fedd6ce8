// CPU kernels of the normalization family (formulas in ops/kernels/normalization.h).
//
// Layer norm works row by row (a row of C values stays in L1): a two-pass mean/variance, then one
// fused affine pass; the backward does gx for a row and accumulates that row's gweight/gbias
// contributions in the same pass. Batch norm views x as [N, C, S] and reduces per channel over
// the N·C spans of S contiguous values.
//
// Cross-row sums (layer norm's gweight/gbias, batch norm's per-channel statistics) are split into
// a fixed number of blocks, each accumulated in double, and the block partials are added in a
// fixed order: the result does not depend on the thread count.
//
// Activations (x, y and their gradients) are stored as S, float32, float64 or bfloat16; the
// statistics, the affine parameters and their gradients are compute_t<S> (float32 beside bfloat16:
// core/dtype.h accumulate_dtype). bfloat16 rows and spans are converted one at a time
// (ops/cpu/storage.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/blocked_sums.h"
#include "tessera/ops/cpu/optional_ptr.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/normalization.h"

namespace tessera {

namespace {

template <class T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using Col = Eigen::Map<Vec<T>>;
template <class T>
using CCol = Eigen::Map<const Vec<T>>;

using cpu::blocked_sums;
using cpu::compute_t;
using cpu::mut_ptr_or_null;
using cpu::ptr_or_null;
using cpu::RunIn;
using cpu::RunOut;

// ---- layer norm ------------------------------------------------------------------------------------

template <class S>
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) {
  using T = compute_t<S>;
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  const S* xp = x.data<S>();
  const T* wp = ptr_or_null<T>(weight);
  const T* bp = ptr_or_null<T>(bias);
  S* yp = y.data<S>();
  T* mp = mean.data<T>();
  T* rp = rstd.data<T>();
  parallel_for(0, rows, std::max<int64_t>(1, 8192 / C), [&](int64_t r0, int64_t r1) {
    RunIn<S> in;
    RunOut<S> out;
    cpu::for_row_blocks(r0, r1, C, [&](int64_t first, int64_t count) {
      const T* xb = in(xp + first * C, count * C);
      T* yb = out(yp + first * C, count * C);
      for (int64_t i = 0, r = first; i < count; ++i, ++r) {
        CCol<T> xr(xb + i * C, C);
        Col<T> yr(yb + i * C, C);
        const T mu = xr.sum() / T(C);
        const T var = (xr - mu).square().sum() / T(C);  // second pass: no cancellation
        const T rs = T(1) / std::sqrt(var + T(eps));
        mp[r] = mu;
        rp[r] = rs;
        if (wp && bp) yr = (xr - mu) * rs * CCol<T>(wp, C) + CCol<T>(bp, C);
        else if (wp) yr = (xr - mu) * rs * CCol<T>(wp, C);
        else if (bp) yr = (xr - mu) * rs + CCol<T>(bp, C);
        else yr = (xr - mu) * rs;
      }
      out.done();
    });
  });
}

template <class S>
void layer_norm_backward_typed(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                               const Tensor& weight, const Tensor& gx, bool add_to_gx, const Tensor& gweight,
                               const Tensor& gbias) {
  using T = compute_t<S>;
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  const S* gp = gy.data<S>();
  const S* xp = x.data<S>();
  const T* mp = mean.data<T>();
  const T* rp = rstd.data<T>();
  const T* wp = ptr_or_null<T>(weight);
  S* gxp = mut_ptr_or_null<S>(gx);
  const bool param_grads = gweight.defined() || gbias.defined();
  std::vector<double> sums = blocked_sums(rows, C, 2, [&](int64_t r0, int64_t r1, double* acc) {
    Vec<T> xhat(C), ghat(C);
    Vec<double> dw = Vec<double>::Zero(C), db = Vec<double>::Zero(C);
    RunIn<S> in_g, in_x;
    RunOut<S> out;
    cpu::for_row_blocks(r0, r1, C, [&](int64_t first, int64_t count) {
      const T* gb = in_g(gp + first * C, count * C);
      const T* xb = in_x(xp + first * C, count * C);
      T* gxb = nullptr;
      if (gxp) gxb = add_to_gx ? out.update(gxp + first * C, count * C) : out(gxp + first * C, count * C);
      for (int64_t i = 0, r = first; i < count; ++i, ++r) {
        CCol<T> g(gb + i * C, C);
        const T rs = rp[r];
        xhat = (CCol<T>(xb + i * C, C) - mp[r]) * rs;
        if (param_grads) {
          dw += (g * xhat).template cast<double>();
          db += g.template cast<double>();
        }
        if (!gxp) continue;
        if (wp) ghat = g * CCol<T>(wp, C);
        else ghat = g;
        const T a = ghat.mean(), b = (ghat * xhat).mean();
        if (add_to_gx) Col<T>(gxb + i * C, C) += rs * (ghat - a - xhat * b);
        else Col<T>(gxb + i * C, C) = rs * (ghat - a - xhat * b);
      }
      if (gxp) out.done();
    });
    Eigen::Map<Vec<double>>(acc, C) = dw;
    Eigen::Map<Vec<double>>(acc + C, C) = db;
  });
  if (gweight.defined()) std::copy(sums.begin(), sums.begin() + C, gweight.data<T>());
  if (gbias.defined()) std::copy(sums.begin() + C, sums.end(), gbias.data<T>());
}

// ---- batch norm ------------------------------------------------------------------------------------

// Per-channel sums over every span (n, c) of S values: k accumulators per channel, span(i, c,
// acc, in) adds span i's (i = n·C + c) contributions to acc[0], acc[C], ... (acc points at channel
// c), reading stored values through the two readers `in` (one pair per block of spans).
template <class S>
using SpanReaders = std::array<RunIn<S>, 2>;
template <class S, class Span>
std::vector<double> channel_sums(const ChannelLayout& d, int k, const Span& span) {
  return blocked_sums(d.N * d.C, d.C, k, [&](int64_t i0, int64_t i1, double* acc) {
    SpanReaders<S> in;
    for (int64_t i = i0; i < i1; ++i) span(i, i % d.C, acc + i % d.C, in);
  });
}

template <class S>
void batch_norm_stats_typed(const Tensor& x, const Tensor& mean, const Tensor& var) {
  using T = compute_t<S>;
  const ChannelLayout d = channel_layout(x);
  const S* xp = x.data<S>();
  const double count = static_cast<double>(d.N * d.S);
  std::vector<double> mu = channel_sums<S>(d, 1, [&](int64_t i, int64_t, double* acc, SpanReaders<S>& in) {
    acc[0] += CCol<T>(in[0](xp + i * d.S, d.S), d.S).sum();
  });
  for (double& m : mu) m /= count;
  std::vector<double> ss = channel_sums<S>(d, 1, [&](int64_t i, int64_t c, double* acc, SpanReaders<S>& in) {
    acc[0] += (CCol<T>(in[0](xp + i * d.S, d.S), d.S) - T(mu[c])).square().sum();
  });
  T* mp = mean.data<T>();
  T* vp = var.data<T>();
  for (int64_t c = 0; c < d.C; ++c) {
    mp[c] = T(mu[c]);
    vp[c] = T(ss[c] / count);
  }
}

template <class S>
void channel_grad_sums_typed(const Tensor& g, const Tensor& x, const Tensor& center, const Tensor& sum_g,
                             const Tensor& sum_gxc) {
  using T = compute_t<S>;
  const ChannelLayout d = channel_layout(x);
  const S* gp = g.data<S>();
  const S* xp = x.data<S>();
  const T* cp = center.data<T>();
  std::vector<double> s = channel_sums<S>(d, 2, [&](int64_t i, int64_t c, double* acc, SpanReaders<S>& in) {
    CCol<T> gs(in[0](gp + i * d.S, d.S), d.S);
    acc[0] += gs.sum();
    acc[d.C] += (gs * (CCol<T>(in[1](xp + i * d.S, d.S), d.S) - cp[c])).sum();
  });
  std::copy(s.begin(), s.begin() + d.C, sum_g.data<T>());
  std::copy(s.begin() + d.C, s.end(), sum_gxc.data<T>());
}

// The runs one task of channel_affine reads and writes.
template <class S>
struct AffineRuns {
  RunIn<S> a, b;
  RunOut<S> out;
};

// out = a·alpha + b·beta + gamma on one contiguous run of stored values; the coefficients are
// scalars (one span of a channel) or arrays (a row of C channels when S == 1). Null b / gamma drop
// their terms.
template <class S, class Coef>
void affine_run(const S* a, const Coef& alpha, const S* b, const Coef& beta, bool has_gamma, const Coef& gamma, S* out,
                int64_t n, AffineRuns<S>& runs) {
  using T = compute_t<S>;
  CCol<T> av(runs.a(a, n), n);
  Col<T> o(runs.out(out, n), n);
  if (b && has_gamma) o = av * alpha + CCol<T>(runs.b(b, n), n) * beta + gamma;
  else if (b) o = av * alpha + CCol<T>(runs.b(b, n), n) * beta;
  else if (has_gamma) o = av * alpha + gamma;
  else o = av * alpha;
  runs.out.done();
}

template <class S>
void channel_affine_typed(const Tensor& a, const Tensor& alpha, const Tensor& b, const Tensor& beta,
                          const Tensor& gamma, const Tensor& out) {
  using T = compute_t<S>;
  const ChannelLayout d = channel_layout(a);
  if (d.N * d.C * d.S == 0) return;
  const S* ap = a.data<S>();
  const S* bp = ptr_or_null<S>(b);
  const T* al = alpha.data<T>();
  const T* be = ptr_or_null<T>(beta);
  const T* ga = ptr_or_null<T>(gamma);
  S* op = out.data<S>();
  if (d.S == 1) {  // [N, C]: vectorise across channels
    CCol<T> A(al, d.C), B(be ? be : al, d.C), G(ga ? ga : al, d.C);
    parallel_for(0, d.N, std::max<int64_t>(1, 16384 / d.C), [&](int64_t n0, int64_t n1) {
      AffineRuns<S> runs;
      for (int64_t n = n0; n < n1; ++n)
        affine_run<S>(ap + n * d.C, A, bp ? bp + n * d.C : nullptr, B, ga != nullptr, G, op + n * d.C, d.C, runs);
    });
    return;
  }
  parallel_for(0, d.N * d.C, std::max<int64_t>(1, 16384 / d.S), [&](int64_t i0, int64_t i1) {
    AffineRuns<S> runs;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i % d.C;
      affine_run<S>(ap + i * d.S, al[c], bp ? bp + i * d.S : nullptr, be ? be[c] : T(0), ga != nullptr,
                    ga ? ga[c] : T(0), op + i * d.S, d.S, runs);
    }
  });
}

template <class T>
void batch_norm_coefficients_typed(const Tensor& mean, const Tensor& var, const Tensor& weight, const Tensor& bias,
                                   const BatchNormMomentum& m, const Tensor& invstd, const Tensor& scale,
                                   const Tensor& shift, const Tensor& running_mean, const Tensor& running_var) {
  const T* mu = mean.data<T>();
  const T* v = var.data<T>();
  const T* w = ptr_or_null<T>(weight);
  const T* b = ptr_or_null<T>(bias);
  T* rm = mut_ptr_or_null<T>(running_mean);
  T* rv = mut_ptr_or_null<T>(running_var);
  for (int64_t c = 0; c < mean.numel(); ++c) {
    const T is = T(1) / std::sqrt(v[c] + T(m.eps)), k = w ? is * w[c] : is;
    invstd.data<T>()[c] = is;
    scale.data<T>()[c] = k;
    shift.data<T>()[c] = b ? b[c] - mu[c] * k : -(mu[c] * k);
    if (rm) {
      rm[c] = rm[c] * T(1.0 - m.momentum) + mu[c] * T(m.momentum);
      rv[c] = rv[c] * T(1.0 - m.momentum) + v[c] * T(m.momentum * m.unbias);
    }
  }
}

template <class T>
void batch_norm_backward_coefficients_typed(const Tensor& scale, const Tensor& invstd, const Tensor& mean,
                                            const Tensor& sum_g, const Tensor& sum_gxc, double inv_m,
                                            const Tensor& beta, const Tensor& gamma, const Tensor& gweight) {
  const T *k = scale.data<T>(), *is = invstd.data<T>(), *mu = mean.data<T>();
  const T *sg = sum_g.data<T>(), *sgx = sum_gxc.data<T>();
  T* gw = mut_ptr_or_null<T>(gweight);
  for (int64_t c = 0; c < scale.numel(); ++c) {
    const T be = -(k[c] * is[c] * is[c] * sgx[c]) * T(inv_m);
    beta.data<T>()[c] = be;
    gamma.data<T>()[c] = -(k[c] * sg[c]) * T(inv_m) - mu[c] * be;
    if (gw) gw[c] = sgx[c] * is[c];
  }
}

}  // namespace

namespace cpu {

void batch_norm_coefficients(const Tensor& mean, const Tensor& var, const Tensor& weight, const Tensor& bias,
                             const BatchNormMomentum& m, const Tensor& invstd, const Tensor& scale, const Tensor& shift,
                             const Tensor& running_mean, const Tensor& running_var) {
  TS_DISPATCH_FLOAT(mean.dtype(), "batch_norm", [&] {
    batch_norm_coefficients_typed<scalar_t>(mean, var, weight, bias, m, invstd, scale, shift, running_mean,
                                            running_var);
  });
}
void batch_norm_backward_coefficients(const Tensor& scale, const Tensor& invstd, const Tensor& mean,
                                      const Tensor& sum_g, const Tensor& sum_gxc, double inv_m, const Tensor& beta,
                                      const Tensor& gamma, const Tensor& gweight) {
  TS_DISPATCH_FLOAT(scale.dtype(), "batch_norm_backward", [&] {
    batch_norm_backward_coefficients_typed<scalar_t>(scale, invstd, mean, sum_g, sum_gxc, inv_m, beta, gamma, gweight);
  });
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  TS_DISPATCH_STORED(x.dtype(), "layer_norm",
                     [&] { layer_norm_forward<storage_t>(x, weight, bias, eps, y, mean, rstd); });
}
void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& gx, bool add_to_gx, const Tensor& gweight,
                         const Tensor& gbias) {
  TS_DISPATCH_STORED(x.dtype(), "layer_norm_backward", [&] {
    layer_norm_backward_typed<storage_t>(gy, x, mean, rstd, weight, gx, add_to_gx, gweight, gbias);
  });
}
void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  TS_DISPATCH_STORED(x.dtype(), "batch_norm", [&] { batch_norm_stats_typed<storage_t>(x, mean, var); });
}
void channel_grad_sums(const Tensor& g, const Tensor& x, const Tensor& center, const Tensor& sum_g,
                       const Tensor& sum_gxc) {
  TS_DISPATCH_STORED(x.dtype(), "batch_norm_backward",
                     [&] { channel_grad_sums_typed<storage_t>(g, x, center, sum_g, sum_gxc); });
}
void channel_affine(const Tensor& a, const Tensor& alpha, const Tensor& b, const Tensor& beta, const Tensor& gamma,
                    const Tensor& out) {
  TS_DISPATCH_STORED(a.dtype(), "batch_norm", [&] { channel_affine_typed<storage_t>(a, alpha, b, beta, gamma, out); });
}

}  // namespace cpu

}  // namespace tessera
