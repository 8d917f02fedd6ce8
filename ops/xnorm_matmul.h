// xnorm_matmul, a fused op (ops/fused.h): UFO-ViT's XNorm of the queries folded into their product
// with the context. Checks, dispatch and gradient: ops/xnorm_matmul.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// (gamma · normalize(q, -1)) · ctx: UFO-ViT's attention output (Eq. 3, 6-7), XN_dim=filter(Q)·(KV)
// with the XNorm of the queries (Eq. 4, L2 over each query's channels, times the per-head gamma)
// for q [B, h, N, d], ctx [B, h, d, e] and gamma [h, 1, 1] -> [B, h, N, e]. Normalising a row of q
// only scales the same row of q·ctx, so the normalised queries are never made: one GEMM of the raw
// q, the row norms, and one pass that scales each row by gamma/max(‖q_n‖, eps). The result is a
// [B, h, N, e] view of token-layout storage [B, N, h, e], so merging the heads afterwards
// (transpose(1, 2) and reshape) copies nothing.
Tensor xnorm_matmul(const Tensor& q, const Tensor& ctx, const Tensor& gamma, double eps = 1e-12);

}  // namespace tessera
