// Kernel interface of xca_attention (internal; ops/xca_attention.h says what it computes). The front
// end (ops/xca_attention.cpp) passes q, k and v as [B, h, N, d] views of the qkv projection and y,
// g and the gradients as views of token-layout tensors, all with unit stride along d; the map's own
// arithmetic is xca_attention_map's (ops/kernels/xca_attention_map.h), per (sample, head).
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

// Per (b, head) m = b·h + head, with q_i, k_j, v_j the channels' rows over the N tokens:
//   nq[m,i] = ‖q_i‖, nk[m,j] = ‖k_j‖, s[m] = q·kᵀ (d×d), a[m] = xca_attention_map's map of s, nq, nk
//   and t[head], y[b, head, n, i] = Σ_j a[m,i,j]·v_j[n].
// q, k, v, y [B, h, N, d] (any strides, unit along d); s, a [B·h, d, d] and nq, nk [B·h, d]
// contiguous, in q's dtype (what the backward reads); t [h] in the accumulation dtype.
using XcaAttentionKernel = void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& t, double eps,
                                const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& a, const Tensor& y);
// From g = ∂L/∂y [B, h, N, d]: ga = g·vᵀ (d×d) and gv = aᵀ·g; xca_attention_map's backward of ga
// gives gs, row_terms (t's gradient is their sum) and the norms' coefficients, then
//   gq = gs·k + q_coef·q,  gk = gsᵀ·q + k_coef·k
// (ops/xca_attention_map.cpp derives them). gq, gk, gv [B, h, N, d] views (unit stride along d) of
// one qkv gradient; row_terms [B·h, d] in t's dtype. Every sum in a fixed order.
using XcaAttentionBackwardKernel = void(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                        const Tensor& t, double eps, const Tensor& gq, const Tensor& gk,
                                        const Tensor& gv, const Tensor& row_terms);

}  // namespace tessera
