// CoaT's parts (Xu et al. 2021), names as timm's coat.py: the patch embedding with its LayerNorm,
// the serial block, and the parallel blocks with their co-scale mixing and the head's aggregate,
// which a model file's parallel_blocks builds (a block kind kept in code: it runs over three
// stages at once, which a per-stage block list cannot say). The kinds a model file names them by
// (models/kinds.h): `patch_embed: linear_norm`, a block's `attn: factor_attention`, `parallel_blocks`.
#pragma once
#include <array>

#include "tessera/models/kinds.h"
#include "tessera/nn/conv_attention.h"
#include "tessera/nn/patch_embed.h"

namespace tessera::models {

// timm's PatchEmbed with a norm: p x p conv with stride p, then LayerNorm(eps 1e-5) on the tokens.
class CoatPatchEmbed : public nn::PatchEmbed {
 public:
  CoatPatchEmbed(int64_t patch_size, int64_t in_chans, int64_t embed_dim);
  Tensor forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w);
  std::string type_name() const override { return "CoatPatchEmbed"; }
  std::shared_ptr<nn::LayerNorm> norm;
};

// Serial block (Fig. 4): x = CPE(x); x += ConvAtt(LN(x)); x += MLP(LN(x)) — a MixerBlock whose
// token mixer is factorised attention; `cpe` and the CRPE inside factoratt_crpe are the stage's
// shared modules.
class CoatSerialBlock : public MixerBlock {
 public:
  CoatSerialBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                  const LayerScaleNames& names);
  std::string type_name() const override { return "SerialBlock"; }
  std::shared_ptr<nn::FactorAttnConvRelPosEnc> factoratt_crpe;
};

// Parallel block (Fig. 5, "attention with feature interpolation") over the last three stages
// (index 0-2 here): cur_s = ConvAtt_s(LN1_s(x_s)); each cur_s adds the others bilinearly resampled
// to its grid (CLS rows summed); x_s += cur_s; x_s += MLP(LN2_s(x_s)) with one MLP shared by the
// three scales. Each scale's CPE (its stage's) applies first, as timm's CoaT.forward_features does
// before each parallel block; the CPEs and CRPEs are the stages' modules, not registered here.
class CoatParallelBlock : public ParallelBlock {
 public:
  CoatParallelBlock(int64_t dim, double mlp_ratio, const std::array<StageShared, 3>& stages, BlockRates rates,
                    double norm_eps);
  std::array<Tensor, 3> forward(const std::array<Tensor, 3>& x, const std::array<TokenGrid, 3>& grids) override;
  std::string type_name() const override { return "ParallelBlock"; }
  std::array<std::shared_ptr<nn::LayerNorm>, 3> norm1, norm2;  // norm12..14, norm22..24
  std::array<std::shared_ptr<nn::FactorAttnConvRelPosEnc>, 3> factoratt_crpe;
  std::shared_ptr<nn::Mlp> mlp;  // registered as mlp2, mlp3 and mlp4

 private:
  std::array<std::shared_ptr<nn::ConvPosEnc>, 3> cpe_;
  double drop_path_;
};

// Tokens [B, 1+h·w, C] on grid `from` -> [B, 1+to.h·to.w, C]: the image tokens resized bilinearly
// (align_corners=false), the CLS row carried unchanged.
Tensor resample_tokens(const Tensor& x, TokenGrid from, TokenGrid to);

// The CoaT head's `aggregate`: torch.nn.Conv1d(3, 1, kernel_size=1) over the stacked CLS tokens
// [B, 3, C] -> [B, C], i.e. w0·cls2 + w1·cls3 + w2·cls4 + b (PyTorch default init).
class CoatAggregate : public nn::Module {
 public:
  CoatAggregate();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv1d"; }
  Tensor weight, bias;  // [1, 3, 1], [1]
};

// `attn: factor_attention`: factorised attention with the stage's CRPE (Eq. 12, nn/conv_attention.h)
// in a CoatSerialBlock, named factoratt_crpe; its projections are drawn as the block is built.
const TokenMixerKind& factor_attention_kind();
// `parallel_blocks`: CoatParallelBlocks and the aggregate of the head.
const ParallelKind& coat_parallel_kind();

}  // namespace tessera::models
