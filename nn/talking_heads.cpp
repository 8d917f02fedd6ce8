#include "tessera/nn/talking_heads.h"

#include <cmath>

#include "tessera/core/levers.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

TalkingHeadAttention::TalkingHeadAttention(int64_t dim, int64_t heads, bool qkv_bias, double attn_drop,
                                           double proj_drop)
    : num_heads(heads), attn_drop_(attn_drop), proj_drop_(proj_drop) {
  TS_CHECK(heads > 0 && dim % heads == 0, "TalkingHeadAttention: dim ", dim, " is not divisible by num_heads ", heads);
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim));
  proj_l = register_module("proj_l", std::make_shared<Linear>(heads, heads));
  proj_w = register_module("proj_w", std::make_shared<Linear>(heads, heads));
}

// Applies a Linear over the heads dim of attention maps [B, h, N, M] (CaiT §3, Eq. of talking
// heads: the logits and the softmax output are each mixed across heads),
//   out[b, o, i, j] = Σ_h W[o, h] · maps[b, h, i, j] + bias[o],
// as one product W · maps_b [h, N·M] per image on the maps' own layout. timm permutes the heads
// last and back around an nn.Linear; on the CPU those permutes are copies of the maps in both
// passes, and the bias gradient a reduction over N·M-row columns of width h (16% of a CaiT-XXS24
// training step together, measured with tessera bench --profile).
static Tensor mix_heads(Linear& mix, const Tensor& maps) {
  ForwardScope scope(mix);
  const int64_t B = maps.size(0), h = maps.size(1), N = maps.size(2), M = maps.size(3);
  Tensor mixed = matmul(mix.weight, maps.reshape({B, h, N * M}));
  if (mix.bias.defined()) mixed = mixed + mix.bias.view({h, 1});
  return scope.output(mixed.view({B, h, N, M}));
}

Tensor TalkingHeadAttention::forward(const Tensor& x) {
  ForwardScope scope(*this);
  TS_CHECK(x.dim() == 3, "TalkingHeadAttention: expected tokens [B, N, d], got ", x.shape());
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), dh = C / num_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  const Tensor projected = qkv->forward(x);  // [B, N, 3·C]
  // One op that keeps no N×N map in memory, unless an observer wants the maps or a dropout on them
  // needs them whole.
  if (levers().fused_talking_heads && !scope.probing() && !(attn_drop_ > 0 && is_training())) {
    // The mixings' parameters in the accumulation dtype the op takes (a model cast to half keeps
    // them half).
    auto mixing = [&](const Tensor& p) { return p.defined() ? p.to(accumulate_dtype(projected.dtype())) : p; };
    const Tensor out = talking_heads_attention(projected, num_heads, scale, mixing(proj_l->weight),
                                               mixing(proj_l->bias), mixing(proj_w->weight), mixing(proj_w->bias));
    return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
  }
  const std::vector<Tensor> qkv_t =
      unbind(projected.reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 1, 4}), 0);  // 3 x [B, h, N, dh]
  Tensor q = qkv_t[0] * scale;
  Tensor scores = matmul(q, qkv_t[1].transpose(-2, -1));  // [B, h, N, N]
  // Each head's own map, as plain multi-head attention would use it (`tessera explain` draws both).
  if (scope.probing()) scope.probe("attention_unmixed", softmax(scores, -1));
  Tensor attn = mix_heads(*proj_w, softmax(mix_heads(*proj_l, scores), -1));
  scope.probe("attention", attn);
  attn = dropout(attn, attn_drop_, is_training());
  Tensor out = matmul(attn, qkv_t[2]).transpose(1, 2).reshape({B, N, C});
  return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
}

}  // namespace tessera::nn
