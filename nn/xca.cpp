#include "tessera/nn/xca.h"

#include "tessera/core/levers.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

XCA::XCA(int64_t dim, int64_t heads, bool qkv_bias, double attn_drop, double proj_drop)
    : num_heads(heads), attn_drop_(attn_drop), proj_drop_(proj_drop) {
  TS_CHECK(heads > 0 && dim % heads == 0, "XCA: dim ", dim, " is not divisible by num_heads ", heads);
  temperature = register_parameter("temperature", ones({heads, 1, 1}));
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim));
}

Tensor XCA::forward(const Tensor& x) {
  ForwardScope scope(*this);
  TS_CHECK(x.dim() == 3, "XCA: expected tokens [B, N, d], got ", x.shape());
  const Tensor projected = qkv->forward(x);  // [B, N, 3·d]
  // The fused op has no dropout inside: with attention dropout in training the map must be made,
  // dropped out and multiplied by v apart.
  const bool map_dropped = is_training() && attn_drop_ > 0.0;
  const Tensor out =
      levers().fused_xca && !map_dropped ? attend_fused(projected, scope) : attend_composed(projected, scope);
  return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
}

// Eq. 1-3 in one op (ops/xca_attention.h), from the projection to the tokens; the map it makes
// anyway reaches a probe only when one listens.
Tensor XCA::attend_fused(const Tensor& projected, ForwardScope& scope) const {
  Tensor attn;
  Tensor out = xca_attention(projected, temperature, num_heads, 1e-12, scope.probing() ? &attn : nullptr);
  scope.probe("attention", attn);
  return out;
}

// The composed ops (TESSERA_FUSED_XCA=0, or attention dropout in training).
Tensor XCA::attend_composed(const Tensor& projected, ForwardScope& scope) const {
  const int64_t B = projected.size(0), N = projected.size(1), C = projected.size(2) / 3, dh = C / num_heads;
  // [B, N, 3, h, dh] -> [3, B, h, dh, N]: channels x tokens per head.
  const std::vector<Tensor> qkv_t = unbind(projected.reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 4, 1}), 0);
  const Tensor &q = qkv_t[0], &k = qkv_t[1], &v = qkv_t[2];
  // softmax(Q̂ K̂ᵀ · temperature) with Q̂, K̂ of unit norm over the tokens (Eq. 3), in one op that
  // never materialises Q̂ and K̂ (ops/xca_attention_map.h).
  Tensor attn = xca_attention_map(q, k, temperature);  // [B, h, dh, dh]
  scope.probe("attention", attn);
  attn = dropout(attn, attn_drop_, is_training());
  return matmul(attn, v).permute({0, 3, 1, 2}).reshape({B, N, C});
}

}  // namespace tessera::nn
