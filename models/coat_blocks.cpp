#include "tessera/models/coat_blocks.h"

#include "tessera/nn/init.h"
#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {
constexpr double kPatchNormEps = 1e-5;  // patch embeddings (plain nn.LayerNorm)
}  // namespace

CoatPatchEmbed::CoatPatchEmbed(int64_t patch_size, int64_t in_chans, int64_t embed_dim)
    : nn::PatchEmbed(patch_size, in_chans, embed_dim) {
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(embed_dim, kPatchNormEps));
}

Tensor CoatPatchEmbed::forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w) {
  nn::ForwardScope scope(*this);
  return scope.output(norm->forward(nn::PatchEmbed::forward(x, grid_h, grid_w)));
}

const TokenMixerKind& factor_attention_kind() {
  static const TokenMixerKind kind{
      [](const BlockSpec& b, int64_t dim, double drop, const StageShared& shared) {
        TS_CHECK(shared.crpe != nullptr, "MixerBlock: factor_attention needs its stage's CRPE");
        auto m = std::make_shared<nn::FactorAttnConvRelPosEnc>(dim, b.num_heads, shared.crpe, b.qkv_bias, drop);
        // timm's CoaT initialises each serial block's attention as it builds it, before the block's MLP.
        return TokenMixer{m,
                          [m](const Tensor& x, int64_t H, int64_t W) { return m->forward(x, H, W); },
                          {m->qkv.get(), m->proj.get()},
                          "factoratt_crpe",
                          /*init_when_built=*/true};
      },
      make_block_of<CoatSerialBlock>};
  return kind;
}

const ParallelKind& coat_parallel_kind() {
  static const ParallelKind kind{
      [](const ParallelSpec& p, int64_t dim, BlockRates rates, const std::array<StageShared, 3>& stages) {
        return std::make_shared<CoatParallelBlock>(dim, p.mlp_ratio, stages, rates, p.norm_eps);
      },
      [] { return std::make_shared<CoatAggregate>(); }};
  return kind;
}

CoatSerialBlock::CoatSerialBlock(const BlockSpec& spec, int64_t dim, BlockRates rates, const StageShared& shared,
                                 const LayerScaleNames& names)
    : MixerBlock(spec, dim, rates, shared, names),
      factoratt_crpe(std::dynamic_pointer_cast<nn::FactorAttnConvRelPosEnc>(mixer)) {
  TS_CHECK(factoratt_crpe != nullptr, "CoatSerialBlock: the block's token mixer is not factorised attention");
}

Tensor resample_tokens(const Tensor& x, TokenGrid from, TokenGrid to) {
  Tensor map = nn::tokens_to_map(x.narrow(1, 1, from.h * from.w), from.h, from.w, "resample_tokens");
  Tensor resized = interpolate(map, {to.h, to.w}, InterpolationMode::Bilinear);
  return cat({x.narrow(1, 0, 1), nn::map_to_tokens(resized)}, 1);
}

CoatParallelBlock::CoatParallelBlock(int64_t dim, double mlp_ratio, const std::array<StageShared, 3>& stages,
                                     BlockRates rates, double norm_eps)
    : cpe_{stages[0].cpe, stages[1].cpe, stages[2].cpe}, drop_path_(rates.drop_path) {
  const int64_t heads = stages[0].crpe->num_heads;
  // timm's registration order: norm12..14, factoratt_crpe2..4, norm22..24, mlp2..4.
  for (int i = 0; i < 3; ++i)
    norm1[i] = register_module("norm1" + std::to_string(i + 2), std::make_shared<nn::LayerNorm>(dim, norm_eps));
  for (int i = 0; i < 3; ++i) {
    auto attn = std::make_shared<nn::FactorAttnConvRelPosEnc>(dim, heads, stages[i].crpe, true, rates.proj_drop);
    nn::init_trunc_normal(*attn->qkv);
    nn::init_trunc_normal(*attn->proj);
    factoratt_crpe[i] = register_module("factoratt_crpe" + std::to_string(i + 2), attn);
  }
  for (int i = 0; i < 3; ++i)
    norm2[i] = register_module("norm2" + std::to_string(i + 2), std::make_shared<nn::LayerNorm>(dim, norm_eps));
  mlp = mlp_of(dim, mlp_ratio, rates.mlp_drop);
  nn::init_trunc_normal(*mlp);
  for (int i = 0; i < 3; ++i) register_module("mlp" + std::to_string(i + 2), mlp);
}

std::array<Tensor, 3> CoatParallelBlock::forward(const std::array<Tensor, 3>& in,
                                                 const std::array<TokenGrid, 3>& grids) {
  std::array<Tensor, 3> x;
  for (size_t k = 0; k < 3; ++k) x[k] = cpe_[k]->forward(in[k], grids[k].h, grids[k].w);
  nn::ForwardScope scope(*this);
  for (const Tensor& scale : x) scope.probe("input", scale);
  const bool train = is_training();
  std::array<Tensor, 3> cur;
  for (int i = 0; i < 3; ++i) cur[i] = factoratt_crpe[i]->forward(norm1[i]->forward(x[i]), grids[i].h, grids[i].w);
  // Co-scale mixing: every scale adds the other two resampled to its grid, summed in timm's order
  // (stage 2: +up(3) +up(4); stage 3: +up(4) +down(2); stage 4: +down(3) +down(2)).
  const int others[3][2] = {{1, 2}, {2, 0}, {1, 0}};
  std::array<Tensor, 3> mixed;
  for (int i = 0; i < 3; ++i) {
    mixed[i] = cur[i];
    for (int j : others[i]) mixed[i] = mixed[i] + resample_tokens(cur[j], grids[j], grids[i]);
  }
  std::array<Tensor, 3> out;
  for (int i = 0; i < 3; ++i) {
    Tensor y = x[i] + nn::drop_path(mixed[i], drop_path_, train);
    out[i] = y + nn::drop_path(mlp->forward(norm2[i]->forward(y)), drop_path_, train);
  }
  return scope.output(out);
}

CoatAggregate::CoatAggregate() {
  weight = register_parameter("weight", Tensor::empty({1, 3, 1}));
  bias = register_parameter("bias", Tensor::empty({1}));
  nn::init::default_weight_and_bias_(weight, bias);
}

Tensor CoatAggregate::forward(const Tensor& x) {
  nn::ForwardScope scope(*this);
  TS_CHECK(x.defined() && x.dim() == 3 && x.size(1) == 3, "CoatAggregate: expected stacked CLS tokens [B, 3, C], got ",
           x.defined() ? x.shape() : Shape{});
  return scope.output(conv1d(x, weight, bias).squeeze(1));
}

}  // namespace tessera::models
