// talking_heads_attention, a fused op (ops/fused.h): CaiT's self-attention with talking heads, no
// N×N map in memory. Checks, dispatch and gradient: ops/talking_heads_attention.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// Talking-heads attention (Shazeer et al. 2020, which CaiT §4.3 adopts) on the output of a qkv
// projection [B, N, 3·C] (timm's layout: channel s·C + h·dh + c is part s of q, k, v, head h of
// num_heads, c < dh = C / num_heads; any strides), with the head mixings w_l, w_w [h, h] and their
// biases b_l, b_w [h] (either may be undefined: none) in qkv's accumulation dtype (float32 beside
// half-precision qkv):
//   S_h = scale·q_h·k_hᵀ,  L_o = Σ_h w_l[o, h]·S_h + b_l[o],  P_o = softmax(L_o) over the keys,
//   A_g = Σ_o w_w[g, o]·P_o + b_w[g],  out[b, i, g·dh + c] = (A_g·v_g)[i, c]
// -> [B, N, C] in token layout (timm's merge of the heads). A block of query rows at a time: none of
// the [B, h, N, N] maps is written to memory, and the backward recomputes them from qkv and the
// softmax's log-sum-exp per row. On CUDA, shapes whose one query row of maps does not fit a block's
// shared memory (ops/kernels/talking_heads_attention.h) run as the composition of matmul, softmax
// and the mixings instead, with the same result.
Tensor talking_heads_attention(const Tensor& qkv, int64_t num_heads, double scale, const Tensor& w_l, const Tensor& b_l,
                               const Tensor& w_w, const Tensor& b_w);

}  // namespace tessera
