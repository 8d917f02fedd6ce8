// Fused ops: sequences of ops that the models run at every block, done in fewer passes over memory
// (the cost of a transformer block outside its GEMMs is the bytes its element-wise steps move).
// Each equals its unfused composition up to rounding (tests/test_fused.cpp checks both, and the
// float64 gradients), runs on every device, and records one backward node.
#pragma once
#include "tessera/core/tensor.h"

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

// The last step of CoaT's factorized attention with its convolutional relative position encoding
// (CoaT Eq. 12, with Eq. 10-11's ÊV): for m = Q·(softmax(K)ᵀV) and q [B, h, N, d] (N = 1 + H·W
// tokens, the CLS token first) and cv = DepthwiseConv2D(P, V_img) [B, h, N−1, d] (image tokens),
//   y[b, n, h·d + c] = scale·m[b, h, n, c] + (n ≥ 1 ? q[b, h, n, c]·cv[b, h, n−1, c] : 0),
// returned [B, N, h·d]: the scale, the Hadamard product, the CLS token's zero row, the sum and the
// heads' merge back into token layout in one pass (five passes and four temporaries unfused).
// Operands may be any strided views (the slices of the qkv projection are).
Tensor factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale);

// CaiT's class attention (§3.3, "Class-attention"): the class token is the only query, so the
// attention is one row of weights per head: softmax(scale·q·kᵀ)·v for q [B, h, 1, d] and k, v
// [B, h, N, d] (N ≥ 1 tokens, any strides, e.g. slices of the k and v projections) -> [B, h, 1, d].
// The N scores, the softmax and the weighted sum of the values are one pass per (sample, head),
// with no [B, h, 1, N] intermediates beyond the weights kept for the backward. When `weights` is
// given it receives those weights [B, h, 1, N] (detached), for attention maps.
Tensor class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor* weights = nullptr);

// (gamma · normalize(q, -1)) · ctx: UFO-ViT's attention output (Eq. 3, 6-7), XN_dim=filter(Q)·(KV)
// with the XNorm of the queries (Eq. 4, L2 over each query's channels, times the per-head gamma)
// for q [B, h, N, d], ctx [B, h, d, e] and gamma [h, 1, 1] -> [B, h, N, e]. Normalising a row of q
// only scales the same row of q·ctx, so the normalised queries are never made: one GEMM of the raw
// q, the row norms, and one pass that scales each row by gamma/max(‖q_n‖, eps). The result is a
// [B, h, N, e] view of token-layout storage [B, N, h, e], so merging the heads afterwards
// (transpose(1, 2) and reshape) copies nothing.
Tensor xnorm_matmul(const Tensor& q, const Tensor& ctx, const Tensor& gamma, double eps = 1e-12);

}  // namespace tessera
