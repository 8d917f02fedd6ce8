#include "tessera/models/blocks.h"

#include "tessera/models/kinds.h"
#include "tessera/models/token_mixers.h"
#include "tessera/nn/attention.h"
#include "tessera/nn/init.h"
#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {

void init_projections(const std::vector<nn::Linear*>& projections) {
  for (nn::Linear* l : projections) nn::init_trunc_normal(*l);
}

std::shared_ptr<MixerBlock> plain_block(const BlockSpec& b, int64_t dim, BlockRates rates, const StageShared& shared,
                                        const LayerScaleNames& names) {
  return std::make_shared<MixerBlock>(b, dim, rates, shared, names);
}

}  // namespace

// ViT's multi-head self-attention (Dosovitskiy et al.; nn/attention.h), a block's `attn: attention`.
const TokenMixerKind& attention_kind() {
  static const TokenMixerKind kind{[](const BlockSpec& b, int64_t dim, double drop, const StageShared&) {
                                     auto m = std::make_shared<nn::Attention>(dim, b.num_heads, b.qkv_bias, 0.0, drop);
                                     return token_mixer(m, {m->qkv.get(), m->proj.get()});
                                   },
                                   plain_block};
  return kind;
}

// A program's own token mixer (models/token_mixers.h), named by the block's `attn:`.
const TokenMixerKind& registered_mixer_kind() {
  static const TokenMixerKind kind{
      [](const BlockSpec& b, int64_t dim, double drop, const StageShared&) {
        const TokenMixerFactory factory = registered_token_mixer(b.registered_attn);
        TS_CHECK(static_cast<bool>(factory), "MixerBlock: no token mixer is registered as '", b.registered_attn, "'");
        std::shared_ptr<nn::Module> m = factory({dim, b.num_heads, b.qkv_bias, drop});
        TS_CHECK(m != nullptr, "MixerBlock: the factory of token mixer '", b.registered_attn, "' returned no module");
        return token_mixer(m, {});  // it initialised its own weights
      },
      plain_block};
  return kind;
}

Tensor scaled_residual(const Tensor& x, const Tensor& branch, const Tensor& gamma) {
  return gamma.defined() ? layer_scale_residual(x, branch, gamma) : x + branch;
}

std::shared_ptr<nn::Mlp> mlp_of(int64_t dim, double mlp_ratio, double drop) {
  return std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(static_cast<double>(dim) * mlp_ratio), drop);
}

MixerBlock::MixerBlock(const BlockSpec& b, int64_t dim, BlockRates rates, const StageShared& shared,
                       const LayerScaleNames& names)
    : drop_path_(rates.drop_path) {
  if (b.layer_scale) {
    gamma1 = register_parameter(names.mixer, full({dim}, *b.layer_scale));
    if (b.local != LocalKind::None) gamma3 = register_parameter(names.local, full({dim}, *b.layer_scale));
    gamma2 = register_parameter(names.mlp, full({dim}, *b.layer_scale));
  }
  if (shared.cpe) cpe = register_module("cpe", shared.cpe);
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, b.norm_eps));
  TokenMixer m = mixer_kind(b.attn).make_mixer(b, dim, rates.proj_drop, shared);
  mixer = register_module(m.name, m.module);
  mix_ = m.forward;
  // When the mixer's projections are drawn again is its kind's (timm's order for that family).
  if (m.init_when_built) init_projections(m.projections);
  if (b.local == LocalKind::Lpi) {
    norm3 = register_module("norm3", std::make_shared<nn::LayerNorm>(dim, b.norm_eps));
    auto lpi = register_module("local_mp", std::make_shared<nn::LPI>(dim));
    local = lpi;
    local_mix_ = [lpi](const Tensor& x, int64_t H, int64_t W) { return lpi->forward(x, H, W); };
  } else if (b.local == LocalKind::DwConv) {
    // UFO-ViT §3.3's "simple depthwise convolution": 3x3 with bias, PyTorch's default init.
    norm3 = register_module("norm3", std::make_shared<nn::LayerNorm>(dim, b.norm_eps));
    auto conv = register_module(
        "local_conv", std::make_shared<nn::Conv2d>(dim, dim, std::array<int64_t, 2>{3, 3}, std::array<int64_t, 2>{1, 1},
                                                   std::array<int64_t, 2>{1, 1}, dim));
    local = conv;
    local_mix_ = [conv](const Tensor& x, int64_t H, int64_t W) {
      return nn::map_to_tokens(conv->forward(nn::tokens_to_map(x, H, W, "local_conv")));
    };
  }
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, b.norm_eps));
  mlp = register_module("mlp", mlp_of(dim, b.mlp_ratio, rates.mlp_drop));
  if (!m.init_when_built) init_projections(m.projections);
  nn::init_trunc_normal(*mlp);
}

Tensor MixerBlock::residual(const Tensor& x, const Tensor& branch, const Tensor& gamma) const {
  return gamma.defined() ? nn::drop_path_residual(x, branch, gamma, drop_path_, is_training())
                         : x + nn::drop_path(branch, drop_path_, is_training());
}

Tensor MixerBlock::forward(const Tensor& x, int64_t H, int64_t W) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);                     // what the block adds to: `tessera explain` draws its relative update
  Tensor y = cpe ? cpe->forward(x, H, W) : x;  // CoaT re-applies its CPE in every block (§4.2, Fig. 2)
  y = residual(y, mix_(norm1->forward(y), H, W), gamma1);
  if (local) y = residual(y, local_mix_(norm3->forward(y), H, W), gamma3);
  return scope.output(residual(y, mlp->forward(norm2->forward(y)), gamma2));
}

TokenOnlyBlock::TokenOnlyBlock(const ClassAttentionSpec& c, int64_t dim, BlockRates rates,
                               const std::function<ClassMixer()>& make_mixer) {
  if (c.layer_scale) {
    gamma_1 = register_parameter("gamma_1", full({dim}, *c.layer_scale));
    gamma_2 = register_parameter("gamma_2", full({dim}, *c.layer_scale));
  }
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, c.norm_eps));
  const ClassMixer m = make_mixer();
  mixer = register_module("attn", m.module);
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, c.norm_eps));
  mlp = register_module("mlp", mlp_of(dim, c.mlp_ratio, rates.mlp_drop));
  init_projections(m.projections);
  nn::init_trunc_normal(*mlp);
}

Tensor TokenOnlyBlock::forward(const Tensor& patches, const Tensor& cls) {
  nn::ForwardScope scope(*this);
  scope.probe("input", cls);  // the block updates the class token alone
  Tensor c = scaled_residual(cls, mixer->forward(norm1->forward(cat({cls, patches}, 1))), gamma_1);
  return scope.output(scaled_residual(c, mlp->forward(norm2->forward(c)), gamma_2));
}

Tensor TokenOnlyBlock::forward(const Tensor& tokens) {
  const int64_t N = tokens.size(1) - 1;
  const Tensor patches = tokens.narrow(1, 1, N);
  return cat({forward(patches, tokens.narrow(1, 0, 1)), patches}, 1);
}

}  // namespace tessera::models
