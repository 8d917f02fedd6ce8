// Talking-heads attention (Shazeer et al. 2020; used by CaiT §4.3): multi-head self-attention
// whose heads exchange information through two learned h x h mixings, one on the attention
// logits before the softmax (proj_l) and one on the weights after it (proj_w):
//   A = proj_w(Softmax(proj_l(Q Kᵀ / √dh))),  out = proj(A V)
// Names as timm: qkv, proj_l, proj_w, proj. The attention runs as one op, talking_heads_attention
// (ops/talking_heads_attention.h: no N×N map in memory), unless the lever fused_talking_heads is off
// (core/levers.h), an observer wants the maps or attention dropout is active in training.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class TalkingHeadAttention : public Module {
 public:
  TalkingHeadAttention(int64_t dim, int64_t num_heads, bool qkv_bias = true, double attn_drop = 0.0,
                       double proj_drop = 0.0);
  Tensor forward(const Tensor& x) override;  // [B, N, d] -> [B, N, d]
  std::string type_name() const override { return "TalkingHeadAttn"; }
  std::shared_ptr<Linear> qkv, proj_l, proj_w, proj;
  int64_t num_heads;

 private:
  double attn_drop_, proj_drop_;
};

}  // namespace tessera::nn
