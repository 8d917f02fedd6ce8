// XCiT's blocks (El-Nouby et al. 2021), names as timm's xcit.py: the XCA block and XCiT's
// class-attention layer, and the kinds a model file names them by (models/kinds.h): a block's
// `attn: xca` is an XCABlock, a head's `class_attention: {style: xcit}` XCiT's class attention.
#pragma once
#include "tessera/models/kinds.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/lpi.h"
#include "tessera/nn/xca.h"

namespace tessera::models {

// One XCiT layer (Fig. 1): x += γ1·XCA(LN(x)); x += γ3·LPI(LN(x)); x += γ2·MLP(LN(x)) — a MixerBlock
// whose token mixer is XCA (Eq. 1), here with typed handles to it and to the LPI.
class XCABlock : public MixerBlock {
 public:
  XCABlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
           const LayerScaleNames& names);
  std::string type_name() const override { return "XCABlock"; }
  std::shared_ptr<nn::XCA> attn;
  std::shared_ptr<nn::LPI> local_mp;  // null unless the block's local mixer is lpi
};

// XCiT's class-attention block (§3.1 "Class attention", official form): the class token attends
// to all tokens; the normalised patch tokens are added back unchanged, and the MLP runs on the
// class token only, with the normalised class token as its residual. A model file's class
// attention of style xcit. Names: gamma1, gamma2, norm1, attn, norm2, mlp.
class XcitClassAttentionBlock : public nn::Module {
 public:
  XcitClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double eta, double drop, bool tokens_norm);
  XcitClassAttentionBlock(const ClassAttentionSpec& spec, int64_t dim, BlockRates rates);  // no drop path
  Tensor forward(const Tensor& x) override;                                                // [B, 1+N, d]
  std::string type_name() const override { return "ClassAttentionBlock"; }
  Tensor gamma1, gamma2;  // undefined without LayerScale
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::ClassAttention> attn;
  std::shared_ptr<nn::Mlp> mlp;

 private:
  bool tokens_norm_;
};

// `attn: xca`: XCA (Eq. 1-3, nn/xca.h) in an XCABlock.
const TokenMixerKind& xca_kind();

}  // namespace tessera::models
