#include "linear_attention.h"

#include <tessera/core/error.h>
#include <tessera/models/token_mixers.h>
#include <tessera/nn/init.h>
#include <tessera/ops/ops.h>

namespace custom {

using tessera::Tensor;

Tensor elu_plus_one(const Tensor& x) { return tessera::relu(x) + tessera::exp(tessera::clamp_max(x, 0.0)); }

LinearAttention::LinearAttention(int64_t dim, int64_t heads) : num_heads(heads) {
  TS_CHECK(heads > 0 && dim % heads == 0, "LinearAttention: dim ", dim, " is not a multiple of num_heads ", heads);
  qkv = register_module("qkv", std::make_shared<tessera::nn::Linear>(dim, 3 * dim));
  proj = register_module("proj", std::make_shared<tessera::nn::Linear>(dim, dim));
}

Tensor LinearAttention::forward(const Tensor& x) {
  // Lets observers of the forward pass (`inspect --summary`) see this module and its output.
  tessera::nn::ForwardScope scope(*this);
  const int64_t B = x.size(0), N = x.size(1), d = x.size(2), dh = d / num_heads;
  // [B, N, 3·d] -> three [B, heads, N, dh] views (one backward writes their three gradients).
  const std::vector<Tensor> qkv_heads =
      tessera::unbind(qkv->forward(x).reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 1, 4}), 0);
  Tensor q = elu_plus_one(qkv_heads[0]);
  Tensor k = elu_plus_one(qkv_heads[1]);
  const Tensor& v = qkv_heads[2];
  Tensor kv = tessera::matmul(k.transpose(2, 3), v);                      // Σ_j φ(k_j) v_jᵀ: [B, h, dh, dh]
  Tensor k_sum = tessera::sum(k, {2}, /*keepdim=*/true).transpose(2, 3);  // Σ_j φ(k_j): [B, h, dh, 1]
  Tensor normaliser = tessera::matmul(q, k_sum);                          // φ(q_i)ᵀ Σ_j φ(k_j): [B, h, N, 1]
  Tensor out = tessera::matmul(q, kv) / normaliser;                       // Eq. 6: [B, h, N, dh]
  // The N x N map the factorisation never forms, φ(q_i)ᵀφ(k_j) / φ(q_i)ᵀ Σ_j φ(k_j), made only for
  // an observer that draws it (`tessera explain` shows the query patch's row).
  if (scope.probing()) scope.probe("attention", tessera::matmul(q, k.transpose(2, 3)) / normaliser);
  return scope.output(proj->forward(out.transpose(1, 2).reshape({B, N, d})));
}

void register_linear_attention_mixer() {
  tessera::models::register_token_mixer("linear_attention", [](const tessera::models::TokenMixerArgs& a) {
    auto attention = std::make_shared<LinearAttention>(a.dim, a.num_heads);
    tessera::nn::init_trunc_normal(*attention->qkv);  // as timm initialises a block's projections
    tessera::nn::init_trunc_normal(*attention->proj);
    return attention;
  });
}

}  // namespace custom
