#include "tessera/nn/class_attention.h"

#include <cmath>

#include "tessera/ops/ops.h"

namespace tessera::nn {

ClassAttention::ClassAttention(int64_t dim, int64_t heads, bool qkv_bias, double attn_drop, double proj_drop)
    : num_heads(heads), attn_drop_(attn_drop), proj_drop_(proj_drop) {
  TS_CHECK(heads > 0 && dim % heads == 0, "ClassAttention: dim ", dim, " is not divisible by num_heads ", heads);
  q = register_module("q", std::make_shared<Linear>(dim, dim, qkv_bias));
  k = register_module("k", std::make_shared<Linear>(dim, dim, qkv_bias));
  v = register_module("v", std::make_shared<Linear>(dim, dim, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim));
}

Tensor ClassAttention::forward(const Tensor& tokens) {
  ForwardScope scope(*this);
  TS_CHECK(tokens.dim() == 3 && tokens.size(1) >= 1, "ClassAttention: expected tokens [B, 1+N, d], got ",
           tokens.shape());
  const int64_t B = tokens.size(0), N = tokens.size(1), C = tokens.size(2), dh = C / num_heads;
  auto heads = [&](const Tensor& t, int64_t n) { return t.reshape({B, n, num_heads, dh}).transpose(1, 2); };
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  Tensor qh = heads(q->forward(tokens.narrow(1, 0, 1)), 1);
  Tensor kh = heads(k->forward(tokens), N), vh = heads(v->forward(tokens), N);
  Tensor out;
  if (attn_drop_ > 0.0 && is_training()) {
    // Dropout on the attention weights sits between the softmax and the product with v: the ops.
    Tensor weights = softmax(matmul(qh * scale, kh.transpose(-2, -1)), -1);  // [B, h, 1, N]
    scope.probe("attention", weights);
    out = matmul(dropout(weights, attn_drop_, true), vh);
  } else {
    Tensor weights;
    out = class_attention(qh, kh, vh, scale, scope.probing() ? &weights : nullptr);  // softmax(q kᵀ/√dh)·v
    scope.probe("attention", weights);
  }
  out = out.transpose(1, 2).reshape({B, 1, C});
  return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
}

}  // namespace tessera::nn
