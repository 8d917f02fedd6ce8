// Kernel interface of the normalization family (internal). The front end (ops/normalization.cpp)
// passes contiguous tensors; weight/bias/gradient outputs may be undefined tensors where absent or
// not needed. Parameters, statistics and per-channel coefficients are in the input's accumulation
// dtype (core/dtype.h: float32 beside a bfloat16/float16 input, the input's dtype otherwise).
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// ---- layer norm: x viewed as [rows, C], normalised over C ------------------------------------------
// y = (x − mean)·rstd·weight + bias, rstd = 1/√(var + eps) with the biased variance; writes
// mean [rows] and rstd [rows] for the backward.
using LayerNormKernel = void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                             const Tensor& mean, const Tensor& rstd);
// With x̂ = (x − mean)·rstd and ĝ = gy·weight (gy where weight is undefined):
//   gx = rstd·(ĝ − mean_C(ĝ) − x̂·mean_C(ĝ·x̂)),  gweight = Σ_rows gy·x̂,  gbias = Σ_rows gy.
// gx, gweight, gbias are each computed only when defined; with `add_to_gx`, gx += the gradient (gx
// holds another consumer's part of it: autograd's gradient_sink).
using LayerNormBackwardKernel = void(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& weight, const Tensor& gx, bool add_to_gx, const Tensor& gweight,
                                     const Tensor& gbias);

// ---- batch norm: x viewed as [N, C, S] (S = product of the dims after 1), per-channel ----------------
struct ChannelLayout {
  int64_t N, C, S;
};
inline ChannelLayout channel_layout(const Tensor& x) {
  const int64_t C = x.shape()[1];
  const int64_t S = C > 0 && x.shape()[0] > 0 ? x.numel() / (x.shape()[0] * C) : 0;
  return {x.shape()[0], C, S};
}

// Biased per-channel mean and variance over N and S (numerically careful: two passes).
using BatchNormStatsKernel = void(const Tensor& x, const Tensor& mean, const Tensor& var);
// Per-channel sums over N and S: sum_g[c] = Σ g, sum_gxc[c] = Σ g·(x − center[c]).
using ChannelGradSumsKernel = void(const Tensor& g, const Tensor& x, const Tensor& center, const Tensor& sum_g,
                                   const Tensor& sum_gxc);
// out = a·alpha[c] + b·beta[c] + gamma[c] per channel; b/beta may be undefined (term omitted). The
// batch-norm forward (y = x·scale + shift) and its backward (gx = gy·α + x·β + γ) are both this.
using ChannelAffineKernel = void(const Tensor& a, const Tensor& alpha, const Tensor& b, const Tensor& beta,
                                 const Tensor& gamma, const Tensor& out);

// The per-channel coefficients of batch norm, in one pass over the C channels (in place of a
// dozen tiny element-wise launches): invstd = 1/√(var + eps), scale = invstd·weight (invstd where
// weight is undefined), shift = bias − mean·scale (−mean·scale where bias is undefined); and, when
// running_mean is defined (training), the running statistics in place:
//   running_mean ← running_mean·(1 − momentum) + mean·momentum,
//   running_var  ← running_var·(1 − momentum) + var·(momentum·unbias).
struct BatchNormMomentum {
  double eps, momentum, unbias;
};
using BatchNormCoefficientsKernel = void(const Tensor& mean, const Tensor& var, const Tensor& weight,
                                         const Tensor& bias, const BatchNormMomentum& m, const Tensor& invstd,
                                         const Tensor& scale, const Tensor& shift, const Tensor& running_mean,
                                         const Tensor& running_var);
// The training backward's coefficients, gx = gy·scale + x·beta + gamma (ops/normalization.cpp):
//   beta = −scale·invstd²·sum_gxc·inv_m,  gamma = −scale·sum_g·inv_m − mean·beta,
// and gweight = sum_gxc·invstd when defined.
using BatchNormBackwardCoefficientsKernel = void(const Tensor& scale, const Tensor& invstd, const Tensor& mean,
                                                 const Tensor& sum_g, const Tensor& sum_gxc, double inv_m,
                                                 const Tensor& beta, const Tensor& gamma, const Tensor& gweight);

}  // namespace tessera
