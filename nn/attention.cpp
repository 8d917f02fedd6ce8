#include "tessera/nn/attention.h"

#include <cmath>

#include "tessera/ops/ops.h"

namespace tessera::nn {

Attention::Attention(int64_t dim, int64_t heads, bool qkv_bias, double attn_drop, double proj_drop)
    : num_heads(heads), attn_drop_(attn_drop), proj_drop_(proj_drop) {
  TS_CHECK(heads > 0 && dim % heads == 0, "Attention: dim ", dim, " is not divisible by num_heads ", heads);
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim));
}

Tensor Attention::forward(const Tensor& x) {
  ForwardScope scope(*this);
  TS_CHECK(x.dim() == 3, "Attention: expected tokens [B, N, d], got ", x.shape());
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), dh = C / num_heads;
  // [B, N, 3·C] -> 3 x [B, h, N, dh]
  const std::vector<Tensor> qkv_t =
      unbind(qkv->forward(x).reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 1, 4}), 0);
  const Tensor q = qkv_t[0] * (1.0 / std::sqrt(static_cast<double>(dh)));
  Tensor attn = softmax(matmul(q, qkv_t[1].transpose(-2, -1)), -1);  // [B, h, N, N]
  scope.probe("attention", attn);
  attn = dropout(attn, attn_drop_, is_training());
  const Tensor out = matmul(attn, qkv_t[2]).transpose(1, 2).reshape({B, N, C});
  return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
}

}  // namespace tessera::nn
