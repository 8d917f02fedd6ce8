// Class attention (CaiT, Touvron et al. 2021, §3, Eq. 5-6 and the following ones): only the class token queries;
// keys and values come from all tokens [CLS, patches]:
//   q = W_q x_cls,  k = W_k z,  v = W_v z,  out = W_o · Softmax(q kᵀ / √dh) v,   z = [x_cls, x_patches]
// Used by CaiT's and XCiT's class-attention blocks (which wrap it differently).
// Names as timm: q, k, v, proj.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class ClassAttention : public Module {
 public:
  ClassAttention(int64_t dim, int64_t num_heads, bool qkv_bias = true, double attn_drop = 0.0, double proj_drop = 0.0);
  // tokens [B, 1+N, d] (class token first) -> the updated class token [B, 1, d]
  Tensor forward(const Tensor& tokens) override;
  std::string type_name() const override { return "ClassAttn"; }
  // Its probe "attention" (nn/probe.h) is the class token's attention over [CLS, patches],
  // softmax(q kᵀ/√dh) as [B, heads, 1, 1+N]: the maps of XCiT's Fig. 4 and CaiT's Fig. 5
  // (`tessera attention-map`, `tessera explain`).
  std::shared_ptr<Linear> q, k, v, proj;
  int64_t num_heads;

 private:
  double attn_drop_, proj_drop_;
};

}  // namespace tessera::nn
