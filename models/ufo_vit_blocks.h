// UFO-ViT's blocks (Song 2021; the project's definition, docs/ufo_vit.md), in XCiT's order and
// naming, and the kinds a model file names them by (models/kinds.h): a block's `attn: ufo` is a
// UFOBlock, a head's `class_attention: {style: cait, attn: ufo}` a UFOClassAttentionBlock.
#pragma once
#include "tessera/models/kinds.h"
#include "tessera/nn/xnorm.h"

namespace tessera::models {

// One UFO-ViT layer (Fig. 2), attention 1, local 3, MLP 2:
//   x += γ1·UFO(LN(x));  x += γ3·DWConv(LN(x));  x += γ2·MLP(LN(x)).
// DWConv is §3.3's "simple depthwise convolution" (3x3, bias) on the token grid.
class UFOBlock : public MixerBlock {
 public:
  UFOBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values, double drop,
           double drop_path);
  UFOBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
           const LayerScaleNames& names);
  std::string type_name() const override { return "UFOBlock"; }
  std::shared_ptr<nn::UFOAttention> attn;
  std::shared_ptr<nn::Conv2d> local_conv;  // null unless the block's local mixer is dwconv
};

// CaiT's class-attention block (§3.3 "Class attention") with UFO class attention:
//   cls += γ_1·UFO_CA(LN([cls, x]));  cls += γ_2·MLP(LN(cls)).
class UFOClassAttentionBlock : public TokenOnlyBlock {
 public:
  // `drop`: the MLP's dropout (the attention's projection has none, docs/ufo_vit.md).
  UFOClassAttentionBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values,
                         double drop);
  UFOClassAttentionBlock(const ClassAttentionSpec& spec, int64_t dim, BlockRates rates);
  std::string type_name() const override { return "UFOClassAttentionBlock"; }
  std::shared_ptr<nn::UFOClassAttention> attn;
};

// `attn: ufo`: UFO attention with XNorm (§3.2, nn/xnorm.h) in a UFOBlock.
const TokenMixerKind& ufo_attention_kind();

}  // namespace tessera::models
