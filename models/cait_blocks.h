// CaiT's blocks (Touvron et al. 2021), names as timm's cait.py: the LayerScale block with
// talking-heads attention and the class-attention layer, and the kinds a model file names them by
// (models/kinds.h): a block's `attn: talking_heads` is a LayerScaleBlock, a head's
// `class_attention: {style: cait}` with CaiT's softmax class attention a LayerScaleClassAttentionBlock.
#pragma once
#include "tessera/models/kinds.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/talking_heads.h"

namespace tessera::models {

// Eq. 4: x' = x + diag(λ)·SA(η(x)),  x'' = x' + diag(λ')·FFN(η(x')), SA with talking heads — a
// MixerBlock whose token mixer is talking-heads attention, with a typed handle to it.
class LayerScaleBlock : public MixerBlock {
 public:
  LayerScaleBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                  const LayerScaleNames& names);
  std::string type_name() const override { return "LayerScaleBlock"; }
  std::shared_ptr<nn::TalkingHeadAttention> attn;
};

// §3: the class token is updated from [cls, patches]; the patch tokens stay frozen; the FFN and
// its pre-norm residual apply to the class token only (TokenOnlyBlock with CaiT's class attention).
class LayerScaleClassAttentionBlock : public TokenOnlyBlock {
 public:
  // `drop`: the MLP's dropout (the attention's projection has none, as in CaiT).
  LayerScaleClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double init_values, double drop);
  LayerScaleClassAttentionBlock(const ClassAttentionSpec& spec, int64_t dim, BlockRates rates);
  std::string type_name() const override { return "LayerScaleBlockClassAttn"; }
  std::shared_ptr<nn::ClassAttention> attn;
};

// `attn: talking_heads`: talking-heads attention (§3, nn/talking_heads.h) in a LayerScaleBlock.
const TokenMixerKind& talking_heads_kind();

}  // namespace tessera::models
