// class_attention, a fused op (ops/fused.h): CaiT's one-query attention, one pass per (sample,
// head). Checks, dispatch and gradient: ops/class_attention.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// CaiT's class attention (§3.3, "Class-attention"): the class token is the only query, so the
// attention is one row of weights per head: softmax(scale·q·kᵀ)·v for q [B, h, 1, d] and k, v
// [B, h, N, d] (N ≥ 1 tokens, any strides, e.g. slices of the k and v projections) -> [B, h, 1, d].
// The N scores, the softmax and the weighted sum of the values are one pass per (sample, head),
// with no [B, h, 1, N] intermediates beyond the weights kept for the backward. When `weights` is
// given it receives those weights [B, h, 1, N] (detached), for attention maps.
Tensor class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor* weights = nullptr);

}  // namespace tessera
