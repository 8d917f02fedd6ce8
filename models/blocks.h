// The blocks a model file's stages and head are made of (models/model_spec.h). One trunk block is
// a choice of its parts — the token mixer, the local mixer, the MLP, LayerScale — so the four
// families' blocks are four choices of the same class, and a hybrid is another:
//   XCiT's XCA block     XCA,              LPI,      LayerScale   (XCABlock, models/xcit_blocks.h)
//   CaiT's block         talking heads,    none,     LayerScale   (LayerScaleBlock, models/cait_blocks.h)
//   CoaT's serial block  factorised attn,  none,     none; the stage's CPE first (CoatSerialBlock)
//   UFO-ViT's block      XNorm attention,  depthwise conv, LayerScale (UFOBlock, models/ufo_vit_blocks.h)
//   ViT's block          self-attention,   none,     optional     (MixerBlock itself, type "Block")
// The subclasses only add typed handles to the parts (block.attn as nn::XCA, ...), which the
// explain command and tests read; what a block computes is MixerBlock's. Each family's file
// declares what its kinds bring (the module, its state_dict name, when its weights are drawn,
// the typed block); models/kinds.h lists where each kind is declared.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/models/model_spec.h"
#include "tessera/nn/conv_attention.h"
#include "tessera/nn/mlp.h"

namespace tessera::models {

// What a block shares with the rest of its stage (CoaT §4.2): the convolutional position
// encoding, applied before every block, and the relative positions of factorised attention.
struct StageShared {
  std::shared_ptr<nn::ConvPosEnc> cpe;
  std::shared_ptr<nn::ConvRelPosEnc> crpe;
};

// The state_dict names of a block's LayerScale gammas, by the model file's `family:`
// (models/model_file_names.h): XCiT's gamma1 (token mixer), gamma2 (MLP), gamma3 (local mixer), or
// CaiT's gamma_1, gamma_2, gamma_3.
struct LayerScaleNames {
  std::string mixer = "gamma1", mlp = "gamma2", local = "gamma3";
};

// A stage's token grid.
struct TokenGrid {
  int64_t h = 0, w = 0;
};

// A block's token mixer as its kind makes it: the module, its state_dict name, how a block calls it
// on tokens of an H x W grid, and the projections that timm's _init_weights draws again
// (trunc_normal .02, bias 0) — when the block is built (CoaT's order) or after it (the others').
struct TokenMixer {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const Tensor&, int64_t, int64_t)> forward;
  std::vector<nn::Linear*> projections;
  std::string name = "attn";
  bool init_when_built = false;
};

// A token mixer that needs only the tokens (every kind but factorised attention, which needs the grid).
template <class M>
TokenMixer token_mixer(std::shared_ptr<M> m, std::vector<nn::Linear*> projections) {
  return {m, [m](const Tensor& x, int64_t, int64_t) { return m->forward(x); }, std::move(projections)};
}

// The dropout rates a block runs with, the model's defaults applied: after the attention's output
// projection, in the MLP, and stochastic depth.
struct BlockRates {
  double proj_drop = 0.0, mlp_drop = 0.0, drop_path = 0.0;
};

// One trunk block, pre-norm residual (XCiT Fig. 1, CaiT Eq. 4, CoaT Fig. 4, UFO-ViT Fig. 2):
//   [x = CPE(x)];  x += γ1·mixer(LN1(x));  [x += γ3·local(LN3(x))];  x += γ2·MLP(LN2(x))
// Without LayerScale a branch is added as it is; drop path (stochastic depth) applies to each.
// Names as timm's: gamma*, cpe, norm1, attn (factoratt_crpe for factorised attention), norm3,
// local_mp (LPI) or local_conv, norm2, mlp.
class MixerBlock : public nn::Module {
 public:
  MixerBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
             const LayerScaleNames& names);
  Tensor forward(const Tensor& x, int64_t H, int64_t W);  // tokens [B, (1+)H·W, dim]
  std::string type_name() const override { return "Block"; }

  Tensor gamma1, gamma3, gamma2;        // undefined without LayerScale (gamma3 also without a local mixer)
  std::shared_ptr<nn::ConvPosEnc> cpe;  // the stage's, or null
  std::shared_ptr<nn::LayerNorm> norm1, norm3, norm2;
  std::shared_ptr<nn::Module> mixer, local;  // local: null without a local mixer
  std::shared_ptr<nn::Mlp> mlp;

 private:
  Tensor residual(const Tensor& x, const Tensor& branch, const Tensor& gamma) const;
  double drop_path_;
  std::function<Tensor(const Tensor&, int64_t, int64_t)> mix_, local_mix_;
};

// A class-attention layer's mixer as its kind makes it: the module and the projections drawn again.
struct ClassMixer {
  std::shared_ptr<nn::Module> module;
  std::vector<nn::Linear*> projections;
};

// CaiT's class-attention layer (§3, "class attention"; timm's blocks_token_only): the class token
// is updated from [cls, patches] while the patch tokens stay as they are; the MLP and its pre-norm
// residual apply to the class token only:
//   cls += γ_1·CA(LN1([cls, x]));  cls += γ_2·MLP(LN2(cls))
// The class-attention mixer is the subclass's: CaiT's softmax one or UFO-ViT's with XNorm. Names:
// gamma_1, gamma_2, norm1, attn, norm2, mlp.
class TokenOnlyBlock : public nn::Module {
 public:
  // No drop path. `make_mixer` is called where the mixer's weights are drawn in timm's order.
  TokenOnlyBlock(const ClassAttentionSpec& spec, int64_t dim, BlockRates rates,
                 const std::function<ClassMixer()>& make_mixer);
  Tensor forward(const Tensor& patches, const Tensor& cls);  // -> the new cls [B, 1, d]
  // The head's call, as every class-attention layer's: [cls, patches] -> [new cls, patches].
  Tensor forward(const Tensor& tokens) override;
  std::string type_name() const override { return "TokenOnlyBlock"; }

  Tensor gamma_1, gamma_2;  // undefined without LayerScale
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::Module> mixer;
  std::shared_ptr<nn::Mlp> mlp;
};

// CoaT's parallel blocks (§5.1) as the model sees them: one step over the last three stages' tokens
// at once; the block applies each stage's CPE first, as a serial block does (models/coat_blocks.h).
class ParallelBlock : public nn::Module {
 public:
  virtual std::array<Tensor, 3> forward(const std::array<Tensor, 3>& x, const std::array<TokenGrid, 3>& grids) = 0;
};

// y = x + gamma ⊙ branch (LayerScale, one fused op) or x + branch without it.
Tensor scaled_residual(const Tensor& x, const Tensor& branch, const Tensor& gamma);

// A block's MLP: hidden width dim·mlp_ratio (rounded down, as timm's int()).
std::shared_ptr<nn::Mlp> mlp_of(int64_t dim, double mlp_ratio, double drop);

}  // namespace tessera::models
