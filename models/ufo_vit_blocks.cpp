#include "tessera/models/ufo_vit_blocks.h"

namespace tessera::models {

namespace {
BlockSpec ufo_block(int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values) {
  BlockSpec b;
  b.attn = MixerKind::Ufo;
  b.attn_dim = attn_dim;
  b.num_heads = heads;
  b.local = LocalKind::DwConv;
  b.mlp_ratio = mlp_ratio;
  b.layer_scale = init_values;
  return b;
}

ClassAttentionSpec ufo_class_attention(int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values) {
  ClassAttentionSpec c;
  c.attn = ClassMixerKind::Ufo;
  c.attn_dim = attn_dim;
  c.num_heads = heads;
  c.mlp_ratio = mlp_ratio;
  c.layer_scale = init_values;
  return c;
}
}  // namespace

UFOBlock::UFOBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values, double drop,
                   double drop_path)
    : UFOBlock(ufo_block(attn_dim, heads, mlp_ratio, init_values), dim, {drop, drop, drop_path}, {}, {}) {}

const TokenMixerKind& ufo_attention_kind() {
  static const TokenMixerKind kind{[](const BlockSpec& b, int64_t dim, double drop, const StageShared&) {
                                     auto m = std::make_shared<nn::UFOAttention>(dim, b.attn_dim ? b.attn_dim : dim,
                                                                                 b.num_heads, b.qkv_bias, drop);
                                     return token_mixer(m, {m->qkv.get(), m->proj.get()});
                                   },
                                   make_block_of<UFOBlock>};
  return kind;
}

UFOBlock::UFOBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                   const LayerScaleNames& names)
    : MixerBlock(spec, dim, rates, shared, names),
      attn(std::dynamic_pointer_cast<nn::UFOAttention>(mixer)),
      local_conv(std::dynamic_pointer_cast<nn::Conv2d>(local)) {
  TS_CHECK(attn != nullptr, "UFOBlock: the block's token mixer is not UFO attention");
}

UFOClassAttentionBlock::UFOClassAttentionBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio,
                                               double init_values, double drop)
    : UFOClassAttentionBlock(ufo_class_attention(attn_dim, heads, mlp_ratio, init_values), dim, {0.0, drop, 0.0}) {}

UFOClassAttentionBlock::UFOClassAttentionBlock(const ClassAttentionSpec& spec, int64_t dim, BlockRates rates)
    : TokenOnlyBlock(spec, dim, rates,
                     [&] {
                       auto a = std::make_shared<nn::UFOClassAttention>(dim, spec.attn_dim ? spec.attn_dim : dim,
                                                                        spec.num_heads, spec.qkv_bias, rates.proj_drop);
                       return ClassMixer{a, {a->q.get(), a->k.get(), a->v.get(), a->proj.get()}};
                     }),
      attn(std::dynamic_pointer_cast<nn::UFOClassAttention>(mixer)) {
  TS_CHECK(attn != nullptr, "UFOClassAttentionBlock: the class attention is not UFO's");
}

}  // namespace tessera::models
