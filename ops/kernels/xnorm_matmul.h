// Kernel interface of xnorm_matmul (internal; ops/xnorm_matmul.h says what it computes). The front
// end (ops/xnorm_matmul.cpp) makes the product and the row norms, contiguous, and the output, a
// token-layout view.
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/strides4.h"

namespace tessera {

// UFO-ViT's XNorm of the queries folded into the product (Eq. 3, 6-7): for p = q·ctx [B, h, N, e]
// (contiguous) and the row norms nq [B, h, N] of q, with q̄ = max(nq, eps),
//   y[b, h, n, c] = (gamma[h] / q̄[b, h, n])·p[b, h, n, c],  y any strides (a token-layout view).
using XnormMatmulKernel = void(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y);
// From g (p's shape, any strides): gp = (gamma / q̄)·g (contiguous) and row_terms[b, h, n] =
// (Σ_c g·p) / q̄ (contiguous; the front end turns it into the gradients of q̄ and gamma).
using XnormMatmulBackwardKernel = void(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma,
                                       double eps, const Tensor& gp, const Tensor& row_terms);

}  // namespace tessera
