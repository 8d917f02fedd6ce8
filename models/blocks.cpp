#include "tessera/models/blocks.h"

#include "tessera/models/token_mixers.h"

#include "tessera/nn/attention.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/init.h"
#include "tessera/nn/lpi.h"
#include "tessera/nn/talking_heads.h"
#include "tessera/nn/xca.h"
#include "tessera/nn/xnorm.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {

// A token mixer: its module, how a block calls it on tokens of an H x W grid, and the projections
// that timm's _init_weights draws again (trunc_normal .02, bias 0).
struct TokenMixer {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const Tensor&, int64_t, int64_t)> forward;
  std::vector<nn::Linear*> projections;
};

template <class M>
TokenMixer token_mixer(std::shared_ptr<M> m, std::vector<nn::Linear*> projections) {
  return {m, [m](const Tensor& x, int64_t, int64_t) { return m->forward(x); }, std::move(projections)};
}

TokenMixer make_mixer(const BlockSpec& b, int64_t dim, double drop, const std::shared_ptr<nn::ConvRelPosEnc>& crpe) {
  switch (b.attn) {
    case MixerKind::Attention: {
      auto m = std::make_shared<nn::Attention>(dim, b.num_heads, b.qkv_bias, 0.0, drop);
      return token_mixer(m, {m->qkv.get(), m->proj.get()});
    }
    case MixerKind::TalkingHeads: {
      auto m = std::make_shared<nn::TalkingHeadAttention>(dim, b.num_heads, b.qkv_bias, 0.0, drop);
      return token_mixer(m, {m->qkv.get(), m->proj.get(), m->proj_l.get(), m->proj_w.get()});
    }
    case MixerKind::Xca: {
      auto m = std::make_shared<nn::XCA>(dim, b.num_heads, b.qkv_bias, 0.0, drop);
      return token_mixer(m, {m->qkv.get(), m->proj.get()});
    }
    case MixerKind::Ufo: {
      auto m = std::make_shared<nn::UFOAttention>(dim, b.attn_dim ? b.attn_dim : dim, b.num_heads, b.qkv_bias, drop);
      return token_mixer(m, {m->qkv.get(), m->proj.get()});
    }
    case MixerKind::FactorAttention: {
      TS_CHECK(crpe != nullptr, "MixerBlock: factor_attention needs its stage's CRPE");
      auto m = std::make_shared<nn::FactorAttnConvRelPosEnc>(dim, b.num_heads, crpe, b.qkv_bias, drop);
      return {
          m, [m](const Tensor& x, int64_t H, int64_t W) { return m->forward(x, H, W); }, {m->qkv.get(), m->proj.get()}};
    }
    case MixerKind::Registered: {
      const TokenMixerFactory factory = registered_token_mixer(b.registered_attn);
      TS_CHECK(static_cast<bool>(factory), "MixerBlock: no token mixer is registered as '", b.registered_attn, "'");
      std::shared_ptr<nn::Module> m = factory({dim, b.num_heads, b.qkv_bias, drop});
      TS_CHECK(m != nullptr, "MixerBlock: the factory of token mixer '", b.registered_attn, "' returned no module");
      return token_mixer(m, {});  // it initialised its own weights
    }
  }
  throw Error("MixerBlock: unknown token mixer");
}

void init_projections(const std::vector<nn::Linear*>& projections) {
  for (nn::Linear* l : projections) nn::init_trunc_normal(*l);
}

std::shared_ptr<nn::Mlp> mlp_of(int64_t dim, double mlp_ratio, double drop) {
  return std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(static_cast<double>(dim) * mlp_ratio), drop);
}

}  // namespace

Tensor scaled_residual(const Tensor& x, const Tensor& branch, const Tensor& gamma) {
  return gamma.defined() ? layer_scale_residual(x, branch, gamma) : x + branch;
}

MixerBlock::MixerBlock(const BlockSpec& b, int64_t dim, BlockRates rates, const StageShared& shared, GammaNames names)
    : drop_path_(rates.drop_path) {
  const bool cait = names == GammaNames::Cait, local_mixer = b.local != LocalKind::None;
  if (b.layer_scale) {
    gamma1 = register_parameter(cait ? "gamma_1" : "gamma1", full({dim}, *b.layer_scale));
    if (local_mixer) gamma3 = register_parameter(cait ? "gamma_3" : "gamma3", full({dim}, *b.layer_scale));
    gamma2 = register_parameter(cait ? "gamma_2" : "gamma2", full({dim}, *b.layer_scale));
  }
  if (shared.cpe) cpe = register_module("cpe", shared.cpe);
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, b.norm_eps));
  TokenMixer m = make_mixer(b, dim, rates.proj_drop, shared.crpe);
  mixer = register_module(b.attn == MixerKind::FactorAttention ? "factoratt_crpe" : "attn", m.module);
  mix_ = m.forward;
  // The order in which the weights are drawn is each family's own (so that a seed gives the
  // weights it gave before the model files): CoaT's serial block initialises its attention as it
  // builds it, the others after building the whole block.
  const bool init_now = b.attn == MixerKind::FactorAttention;
  if (init_now) init_projections(m.projections);
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
  if (!init_now) init_projections(m.projections);
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

TokenOnlyBlock::TokenOnlyBlock(const ClassAttentionSpec& c, int64_t dim, BlockRates rates) {
  if (c.layer_scale) {
    gamma_1 = register_parameter("gamma_1", full({dim}, *c.layer_scale));
    gamma_2 = register_parameter("gamma_2", full({dim}, *c.layer_scale));
  }
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, c.norm_eps));
  std::vector<nn::Linear*> projections;
  if (c.attn == ClassMixerKind::Ufo) {
    auto a = std::make_shared<nn::UFOClassAttention>(dim, c.attn_dim ? c.attn_dim : dim, c.num_heads, c.qkv_bias,
                                                     rates.proj_drop);
    projections = {a->q.get(), a->k.get(), a->v.get(), a->proj.get()};
    mixer = register_module("attn", a);
  } else {
    auto a = std::make_shared<nn::ClassAttention>(dim, c.num_heads, c.qkv_bias, 0.0, rates.proj_drop);
    projections = {a->q.get(), a->k.get(), a->v.get(), a->proj.get()};
    mixer = register_module("attn", a);
  }
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, c.norm_eps));
  mlp = register_module("mlp", mlp_of(dim, c.mlp_ratio, rates.mlp_drop));
  init_projections(projections);
  nn::init_trunc_normal(*mlp);
}

Tensor TokenOnlyBlock::forward(const Tensor& patches, const Tensor& cls) {
  nn::ForwardScope scope(*this);
  scope.probe("input", cls);  // the block updates the class token alone
  Tensor c = scaled_residual(cls, mixer->forward(norm1->forward(cat({cls, patches}, 1))), gamma_1);
  return scope.output(scaled_residual(c, mlp->forward(norm2->forward(c)), gamma_2));
}

}  // namespace tessera::models
