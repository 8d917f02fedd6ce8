#include "tessera/nn/xca.h"

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
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), dh = C / num_heads;
  // [B, N, 3, h, dh] -> [3, B, h, dh, N]: channels x tokens per head.
  const std::vector<Tensor> qkv_t =
      unbind(qkv->forward(x).reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 4, 1}), 0);
  const Tensor &q = qkv_t[0], &k = qkv_t[1], &v = qkv_t[2];
  // softmax(Q̂ K̂ᵀ · temperature) with Q̂, K̂ of unit norm over the tokens (Eq. 3), in one op that
  // never materialises Q̂ and K̂ (ops/xca_attention_map.h).
  Tensor attn = xca_attention_map(q, k, temperature);  // [B, h, dh, dh]
  scope.probe("attention", attn);
  attn = dropout(attn, attn_drop_, is_training());
  Tensor out = matmul(attn, v).permute({0, 3, 1, 2}).reshape({B, N, C});
  return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
}

}  // namespace tessera::nn
