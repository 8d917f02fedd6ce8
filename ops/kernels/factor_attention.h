// Kernel interface of factor_attention (internal; ops/factor_attention.h says what it computes). The
// front end (ops/factor_attention.cpp) passes q, k and v as [B, h, N, d] views of the qkv projection
// and y, g and the gradients of q, k and v as views of token-layout tensors, all with unit stride
// along d; cv may have any strides, gcv is contiguous.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

// Per (b, head) m = b·h + head, with p = softmax(k) over the N tokens per channel (CoaT Eq. 3):
//   lse[m, i] = log Σ_n exp(k[n, i])   (the column statistics, from which the backward recomputes p)
//   ctx[m] = pᵀ·v (d×d),  y[b, head, n, c] = scale·Σ_i q[n, i]·ctx[m, i, c] + (n ≥ 1 ? q[n, c]·cv[n−1, c] : 0).
// q, k, v, y [B, h, N, d] (unit stride along d); cv [B, h, N−1, d] (any strides); ctx [B·h, d, d]
// contiguous in q's dtype, lse [B·h, d] contiguous in the accumulation dtype.
using FactorAttentionKernel = void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cv, double scale,
                                   const Tensor& ctx, const Tensor& lse, const Tensor& y);
// From g = ∂L/∂y [B, h, N, d], per (sample, head): gctx = scale·qᵀ·g (d×d) and
// dot[i] = Σ_c ctx[i, c]·gctx[i, c] (= Σ_n p[n, i]·(v·gctxᵀ)[n, i], softmax's row term), then per token
//   gq = scale·g·ctxᵀ + (n ≥ 1 ? g ⊙ cv : 0),  gv = p·gctx,  gk = p ⊙ (v·gctxᵀ − dot),
//   gcv[n−1] = g[n] ⊙ q[n]
// with p = exp(k − lse) recomputed. gq, gk, gv [B, h, N, d] views (unit stride along d) of one qkv
// gradient; gcv [B, h, N−1, d] contiguous. Every sum in a fixed order.
using FactorAttentionBackwardKernel = void(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                           const Tensor& cv, const Tensor& ctx, const Tensor& lse, double scale,
                                           const Tensor& gq, const Tensor& gk, const Tensor& gv, const Tensor& gcv);

}  // namespace tessera
