// factor_attention, a fused op (ops/fused.h): CoaT's whole factorized attention with its
// convolutional relative position encoding, from the qkv projection to the heads' output in token
// layout. Checks, dispatch and gradient: ops/factor_attention.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// CoaT's factorized attention (Eq. 3) with CRPE (Eq. 10-12) for the qkv projection [B, N, 3·C] of
// C = h·d channels (timm's layout: q, k, v, then within each the heads, any strides; N = 1 + H·W
// tokens, the CLS token first) and cv = DepthwiseConv2D(P, V_img) [B, h, N−1, d] (the image tokens'
// convolved values, any strides):
//   y[b, n, head·d + c] = scale·(q·(softmax(k)ᵀ·v))[n, c] + (n ≥ 1 ? q[n, c]·cv[n−1, c] : 0),
// softmax over the N tokens per channel, returned [B, N, C]. One pass per (sample, head) reads its
// q, k and v where the projection holds them and writes the token layout: no softmax(k), no
// [B, h, N, d] product and no merge pass of factor_attention_merge. The depthwise convolution
// itself stays the conv2d op. The gradients of q, k and v go into one [B, N, 3·C] tensor.
Tensor factor_attention(const Tensor& qkv, const Tensor& cv, int64_t num_heads, double scale);

}  // namespace tessera
