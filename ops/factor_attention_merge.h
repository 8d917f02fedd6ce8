// factor_attention_merge, a fused op (ops/fused.h): the output step of CoaT's factorized attention
// with its CRPE, merged into token layout in one pass. Checks, dispatch and gradient:
// ops/factor_attention_merge.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// The last step of CoaT's factorized attention with its convolutional relative position encoding
// (CoaT Eq. 12, with Eq. 10-11's ÊV): for m = Q·(softmax(K)ᵀV) and q [B, h, N, d] (N = 1 + H·W
// tokens, the CLS token first) and cv = DepthwiseConv2D(P, V_img) [B, h, N−1, d] (image tokens),
//   y[b, n, h·d + c] = scale·m[b, h, n, c] + (n ≥ 1 ? q[b, h, n, c]·cv[b, h, n−1, c] : 0),
// returned [B, N, h·d]: the scale, the Hadamard product, the CLS token's zero row, the sum and the
// heads' merge back into token layout in one pass (five passes and four temporaries unfused).
// Operands may be any strided views (the slices of the qkv projection are).
Tensor factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale);

}  // namespace tessera
