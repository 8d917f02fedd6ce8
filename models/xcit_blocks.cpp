#include "tessera/models/xcit_blocks.h"

#include "tessera/nn/init.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

const TokenMixerKind& xca_kind() {
  static const TokenMixerKind kind{[](const BlockSpec& b, int64_t dim, double drop, const StageShared&) {
                                     auto m = std::make_shared<nn::XCA>(dim, b.num_heads, b.qkv_bias, 0.0, drop);
                                     return token_mixer(m, {m->qkv.get(), m->proj.get()});
                                   },
                                   make_block_of<XCABlock>};
  return kind;
}

XCABlock::XCABlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                   const LayerScaleNames& names)
    : MixerBlock(spec, dim, rates, shared, names),
      attn(std::dynamic_pointer_cast<nn::XCA>(mixer)),
      local_mp(std::dynamic_pointer_cast<nn::LPI>(local)) {
  TS_CHECK(attn != nullptr, "XCABlock: the block's token mixer is not XCA");
}

namespace {
ClassAttentionSpec xcit_class_attention(int64_t heads, double mlp_ratio, double eta, bool tokens_norm) {
  ClassAttentionSpec c;
  c.style = ClassAttentionStyle::AllTokens;
  c.num_heads = heads;
  c.mlp_ratio = mlp_ratio;
  c.layer_scale = eta;
  c.tokens_norm = tokens_norm;
  return c;
}
}  // namespace

XcitClassAttentionBlock::XcitClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double eta, double drop,
                                                 bool tokens_norm)
    : XcitClassAttentionBlock(xcit_class_attention(heads, mlp_ratio, eta, tokens_norm), dim, {drop, drop, 0.0}) {}

XcitClassAttentionBlock::XcitClassAttentionBlock(const ClassAttentionSpec& c, int64_t dim, BlockRates rates)
    : tokens_norm_(c.tokens_norm) {
  if (c.layer_scale) {
    gamma1 = register_parameter("gamma1", full({dim}, *c.layer_scale));
    gamma2 = register_parameter("gamma2", full({dim}, *c.layer_scale));
  }
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, c.norm_eps));
  attn =
      register_module("attn", std::make_shared<nn::ClassAttention>(dim, c.num_heads, c.qkv_bias, 0.0, rates.proj_drop));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, c.norm_eps));
  mlp = register_module("mlp", mlp_of(dim, c.mlp_ratio, rates.mlp_drop));
  for (auto* l : {attn->q.get(), attn->k.get(), attn->v.get(), attn->proj.get()}) nn::init_trunc_normal(*l);
  nn::init_trunc_normal(*mlp);
}

Tensor XcitClassAttentionBlock::forward(const Tensor& x) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);
  const int64_t N = x.size(1);
  Tensor xn = norm1->forward(x);
  // The class token gets attention; the patch tokens get their normalised selves back.
  Tensor y = scaled_residual(x, cat({attn->forward(xn), xn.narrow(1, 1, N - 1)}, 1), gamma1);
  y = tokens_norm_ ? norm2->forward(y) : cat({norm2->forward(y.narrow(1, 0, 1)), y.narrow(1, 1, N - 1)}, 1);
  Tensor cls = mlp->forward(y.narrow(1, 0, 1));
  if (gamma2.defined()) cls = gamma2 * cls;
  // The patch tokens double, as in timm and the official code.
  return scope.output(y + cat({cls, y.narrow(1, 1, N - 1)}, 1));
}

}  // namespace tessera::models
