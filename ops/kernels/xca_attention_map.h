// Kernel interface of xca_attention_map (internal; ops/xca_attention_map.h says what it computes).
// The front end (ops/xca_attention_map.cpp) makes the product and the norms and passes them
// contiguous.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// XCA's attention map over M = B·h matrices of d×d (rows i, columns j), with q̄ = max(nq, eps) and
// k̄ = max(nk, eps) (the row norms of q and k over the tokens) and t = temperature[m % h]:
//   z[m,i,j] = t·c[m,i,j],  c = s[m,i,j] / (q̄[m,i]·k̄[m,j]),  a[m,i,:] = softmax(z[m,i,:]).
// s [M, d, d] (= q·kᵀ), nq and nk [M, d], t [h], a [M, d, d]; all contiguous.
using XcaAttentionMapKernel = void(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                                   const Tensor& a);
// From ga = ∂L/∂a, with gz = a ⊙ (ga − Σ_j ga·a) (softmax's backward per row) and the sums
// R_i = Σ_j gz·c, C_j = Σ_i gz·c (in a fixed order):
//   gs = gz·t / (q̄·k̄),  row_terms[m,i] = R_i (t's gradient is their sum),
//   q_coef[m,i] = [nq ≥ eps]·(−t·R_i / q̄²),  k_coef[m,j] = [nk ≥ eps]·(−t·C_j / k̄²)
// (q's gradient through its norms is q_coef·q, k's is k_coef·k). gs is in s's dtype; row_terms,
// q_coef and k_coef [M, d] in t's, the accumulation dtype.
using XcaAttentionMapBackwardKernel = void(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq,
                                           const Tensor& nk, const Tensor& t, double eps, const Tensor& gs,
                                           const Tensor& row_terms, const Tensor& q_coef, const Tensor& k_coef);

}  // namespace tessera
