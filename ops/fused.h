// Fused ops: sequences of ops that the models run at every block, done in fewer passes over memory
// (the cost of a transformer block outside its GEMMs is the bytes its element-wise steps move).
// Each equals its unfused composition up to rounding (tests/test_fused.cpp checks both, and the
// float64 gradients), runs on every device, and records one backward node.
#pragma once
#include "core/tensor.h"

namespace tessera {

// y = x + s · (gamma ⊙ f): a residual connection with LayerScale (CaiT §2.1, Eq. 3; XCiT's η
// gammas), gamma [C] over the last dim of x and f (same shape), and s an optional per-sample scale
// [B] over the first dim — stochastic depth's mask/(1 − p) — or undefined (1). One pass forward;
// the backward makes gf and gamma's gradient in one pass too.
Tensor layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale = Tensor());

// gelu(x·Wᵀ + b) (the erf form, or tanh when `approximate`): the first half of every transformer
// MLP. The GEMM runs without its bias; one element-wise pass adds the bias and applies GELU, and
// the backward derives through GELU and sums the bias gradient in one pass. Under autocast it is
// the plain composition.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, bool approximate = false);

// softmax(temperature · normalize(q)·normalize(k)ᵀ) over the last dim: XCiT's cross-covariance
// attention map (XCiT Eq. 3, softmax(K̂ᵀQ̂/τ) with timm's multiplier form of τ), for q and k
// [B, h, d, N] (channels × tokens per head, any strides) and temperature [h, 1, 1]; returns
// [B, h, d, d]. Normalising over the tokens is a scaling of rows and columns of the small d×d map,
// so the normalised q and k ([B, h, d, N] each) are never made: the token-axis norms, one GEMM of
// the raw q and k, and one pass that scales, applies the temperature and takes the softmax
// (ops/kernels/fused.h). F.normalize's eps (> 0): norms below it count as eps.
Tensor xca_attention_map(const Tensor& q, const Tensor& k, const Tensor& temperature, double eps = 1e-12);

}  // namespace tessera
