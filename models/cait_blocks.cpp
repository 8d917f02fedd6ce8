#include "tessera/models/cait_blocks.h"

namespace tessera::models {

LayerScaleBlock::LayerScaleBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                                 GammaNames names)
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
    : TokenOnlyBlock(spec, dim, rates), attn(std::dynamic_pointer_cast<nn::ClassAttention>(mixer)) {
  TS_CHECK(attn != nullptr, "LayerScaleClassAttentionBlock: the class attention is not CaiT's");
}

}  // namespace tessera::models
