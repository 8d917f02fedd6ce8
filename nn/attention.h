// Multi-head self-attention (Vaswani et al. 2017, Eq. 1; ViT's, Dosovitskiy et al. 2021, Eq. 5-7):
//   Attention(Q, K, V) = Softmax(Q Kᵀ / √dh) V   per head,   out = proj(concat of the heads)
// The token mixer of the plain ViT block, and the baseline the four families' attentions replace:
// its N x N map costs O(N²·d). Names as timm's Attention: qkv, proj.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class Attention : public Module {
 public:
  Attention(int64_t dim, int64_t num_heads, bool qkv_bias = true, double attn_drop = 0.0, double proj_drop = 0.0);
  Tensor forward(const Tensor& x) override;  // [B, N, d] -> [B, N, d]
  std::string type_name() const override { return "Attention"; }
  // Its probe "attention" (nn/probe.h) is softmax(q kᵀ/√dh), [B, heads, N, N].
  std::shared_ptr<Linear> qkv, proj;
  int64_t num_heads;

 private:
  double attn_drop_, proj_drop_;
};

}  // namespace tessera::nn
