// xca_attention_map, a fused op (ops/fused.h): XCiT's cross-covariance attention map without the
// normalised q and k. Checks, dispatch and gradient: ops/xca_attention_map.cpp.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

// softmax(temperature · normalize(q)·normalize(k)ᵀ) over the last dim: XCiT's cross-covariance
// attention map (XCiT Eq. 3, softmax(K̂ᵀQ̂/τ) with timm's multiplier form of τ), for q and k
// [B, h, d, N] (channels × tokens per head, any strides) and temperature [h, 1, 1]; returns
// [B, h, d, d]. Normalising over the tokens is a scaling of rows and columns of the small d×d map,
// so the normalised q and k ([B, h, d, N] each) are never made: the token-axis norms, one GEMM of
// the raw q and k, and one pass that scales, applies the temperature and takes the softmax
// (ops/kernels/xca_attention_map.h). F.normalize's eps (> 0): norms below it count as eps.
Tensor xca_attention_map(const Tensor& q, const Tensor& k, const Tensor& temperature, double eps = 1e-12);

}  // namespace tessera
