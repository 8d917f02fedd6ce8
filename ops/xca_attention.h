// xca_attention, a fused op (ops/fused.h): XCiT's whole cross-covariance attention, from the qkv
// projection to the heads' output in token layout. Checks, dispatch and gradient:
// ops/xca_attention.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// XCiT's cross-covariance attention (Eq. 1-3) for the qkv projection [B, N, 3·C] of C = h·d channels
// (timm's layout: q, k, v, then within each the heads, any strides) and temperature [h, 1, 1]:
//   out[b, n, head·d + i] = Σ_j a[b, head, i, j]·v[b, n, head, j],
//   a = softmax(temperature · normalize(q)·normalize(k)ᵀ) with q, k as [B, h, d, N], normalised
// over the tokens (xca_attention_map, whose map and gradient this op shares). One pass per (sample,
// head) reads its q, k and v from the projection and writes straight into token layout [B, N, C]:
// no per-head copies of q, k, v or of the output. F.normalize's eps (> 0). When `map` is given it
// receives the map [B, h, d, d] (detached), which the op computes anyway, for attention maps.
Tensor xca_attention(const Tensor& qkv, const Tensor& temperature, int64_t num_heads, double eps = 1e-12,
                     Tensor* map = nullptr);

}  // namespace tessera
