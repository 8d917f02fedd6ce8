// Cross-covariance attention (XCiT, El-Nouby et al. 2021, Eq. 1):
//   XC-Attention(Q, K, V) = V · A_XC(K, Q),   A_XC(K, Q) = Softmax(K̂ᵀ Q̂ / τ)
// computed per head on channel x channel (dh x dh) maps, with Q̂, K̂ L2-normalised along the
// token axis and a learned per-head temperature (timm stores it as a multiplier, init 1). The map
// is dh x dh, so the cost is linear in the number of tokens N. In timm's layout (q, k, v as
// [B, h, dh, N]) this is softmax(q̂ k̂ᵀ · temperature) @ v.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class XCA : public Module {
 public:
  XCA(int64_t dim, int64_t num_heads, bool qkv_bias = true, double attn_drop = 0.0, double proj_drop = 0.0);
  Tensor forward(const Tensor& x) override;  // [B, N, d] -> [B, N, d]
  std::string type_name() const override { return "XCA"; }
  Tensor temperature;  // [h, 1, 1], init 1
  std::shared_ptr<Linear> qkv, proj;
  int64_t num_heads;

 private:
  // The heads' attention from the qkv projection [B, N, 3·d] to the tokens [B, N, d], before proj.
  Tensor attend_fused(const Tensor& projected, ForwardScope& scope) const;
  Tensor attend_composed(const Tensor& projected, ForwardScope& scope) const;
  double attn_drop_, proj_drop_;
};

}  // namespace tessera::nn
