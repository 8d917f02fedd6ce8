#include "tessera/models/cait_blocks.h"

namespace tessera::models {

const TokenMixerKind& talking_heads_kind() {
  static const TokenMixerKind kind{
      [](const BlockSpec& b, int64_t dim, double drop, const StageShared&) {
        auto m = std::make_shared<nn::TalkingHeadAttention>(dim, b.num_heads, b.qkv_bias, 0.0, drop);
        return token_mixer(m, {m->qkv.get(), m->proj.get(), m->proj_l.get(), m->proj_w.get()});
      },
      make_block_of<LayerScaleBlock>};
  return kind;
}

LayerScaleBlock::LayerScaleBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                                 const LayerScaleNames& names)
    : MixerBlock(spec, dim, rates, shared, names), attn(std::dynamic_pointer_cast<nn::TalkingHeadAttention>(mixer)) {
  TS_CHECK(attn != nullptr, "LayerScaleBlock: the block's token mixer is not talking-heads attention");
}

namespace {
ClassAttentionSpec cait_class_attention(int64_t heads, double mlp_ratio, double init_values) {
  ClassAttentionSpec c;
  c.num_heads = heads;
  c.mlp_ratio = mlp_ratio;
  c.layer_scale = init_values;
  return c;
}
}  // namespace

LayerScaleClassAttentionBlock::LayerScaleClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio,
                                                             double init_values, double drop)
    : LayerScaleClassAttentionBlock(cait_class_attention(heads, mlp_ratio, init_values), dim, {0.0, drop, 0.0}) {}

LayerScaleClassAttentionBlock::LayerScaleClassAttentionBlock(const ClassAttentionSpec& spec, int64_t dim,
                                                             BlockRates rates)
    : TokenOnlyBlock(spec, dim, rates,
                     [&] {
                       auto a = std::make_shared<nn::ClassAttention>(dim, spec.num_heads, spec.qkv_bias, 0.0,
                                                                     rates.proj_drop);
                       return ClassMixer{a, {a->q.get(), a->k.get(), a->v.get(), a->proj.get()}};
                     }),
      attn(std::dynamic_pointer_cast<nn::ClassAttention>(mixer)) {
  TS_CHECK(attn != nullptr, "LayerScaleClassAttentionBlock: the class attention is not CaiT's");
}

}  // namespace tessera::models
