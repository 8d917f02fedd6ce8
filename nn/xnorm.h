// UFO-ViT's cross-normalisation and the two attention modules built on it (Song 2021,
// arXiv 2109.14382, §3.1-3.2; the project's definition: docs/ufo_vit.md).
//
// XNorm (Eq. 4):  XN(a) = γ · a / ‖a‖₂, a plain L2 normalisation along one axis, times a learned γ.
// UFO attention (Eq. 3): softmax is dropped, so the product reassociates:
//   A(x) = XN_dim=filter(Q) · XN_dim=space(Kᵀ V)
// KV = Kᵀ V (Eq. 5) is a dh x dh matrix per head, summed over the tokens before any normalisation,
// so the cost is O(N·dh²): linear in the number of tokens N. Eq. 6-8: row n of Q is normalised over
// its channels (q̂_n), column j of KV over its first (key-channel) index (k̂_j), and
// A[n, j] = q̂_n · k̂_j - a cosine times γ², since the same per-head γ [h, 1, 1] scales both XNorms
// ("applied to all heads to scale the importance of each head", §3.3).
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

// Eq. 4: gamma · x / max(‖x‖₂ along dim, eps) (the clamp is F.normalize's, so an all-zero slice
// gives zeros, not NaN). gamma broadcasts against x (e.g. [h, 1, 1] against [B, h, N, dh]).
Tensor xnorm(const Tensor& x, const Tensor& gamma, int64_t dim, double eps = 1e-12);

// Eq. 5 + 8: XN_dim=space(kᵀ v) for k, v [B, h, N, dh] -> [B, h, dh, dh]; every column (over
// dim -2) has norm |γ_h|. Its shape does not depend on N: this is where the linear cost comes from.
Tensor ufo_context(const Tensor& k, const Tensor& v, const Tensor& gamma);

// Eq. 3 / 6-7: XN_dim=filter(q) · ufo_context(k, v, γ) for q [B, h, Nq, dh] -> [B, h, Nq, dh].
// No softmax and no dh^-1/2 scale.
Tensor ufo_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gamma);

// The UFO module (Fig. 3) as a multi-head self-attention layer. The attention's inner width E
// (Table 1's "#Embed") differs from the model width d: qkv maps d -> 3E, proj maps E -> d, and
// the head dim is E/h. Names: gamma [h, 1, 1] (init 1), qkv.*, proj.*.
class UFOAttention : public Module {
 public:
  UFOAttention(int64_t dim, int64_t embed_dim, int64_t num_heads, bool qkv_bias = true, double proj_drop = 0.0);
  Tensor forward(const Tensor& x) override;  // [B, N, d] -> [B, N, d]
  std::string type_name() const override { return "UFOAttention"; }
  Tensor gamma;
  std::shared_ptr<Linear> qkv, proj;
  int64_t dim, embed_dim, num_heads;

 private:
  double proj_drop_;
};

// CaiT's class attention (§3.3 "Class attention") built from the UFO module: only the class token
// queries, keys and values come from all tokens [CLS, patches]:
//   out = proj(ufo_attention(q(x_cls), k(z), v(z), γ)),  z = [x_cls, x_patches].
// Names as CaiT's ClassAttn plus the XNorm scale: gamma [h, 1, 1], q.*, k.*, v.* (d -> E), proj.*.
class UFOClassAttention : public Module {
 public:
  UFOClassAttention(int64_t dim, int64_t embed_dim, int64_t num_heads, bool qkv_bias = true, double proj_drop = 0.0);
  // tokens [B, 1+N, d] (class token first) -> the class token's update [B, 1, d]
  Tensor forward(const Tensor& tokens) override;
  std::string type_name() const override { return "UFOClassAttention"; }
  Tensor gamma;
  std::shared_ptr<Linear> q, k, v, proj;
  int64_t dim, embed_dim, num_heads;

 private:
  double proj_drop_;
};

}  // namespace tessera::nn
