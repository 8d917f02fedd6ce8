// A small vision transformer built from Tessera's blocks around the new attention:
//   patch embedding -> + learned positions -> depth x [x += Attn(LN(x)); x += MLP(LN(x))]
//   -> 2 x CaiT class-attention blocks on a class token -> LayerNorm -> head on the class token.
// Only the attention in the token-mixing blocks is new; the patch embedding, MLP, LayerNorm and
// CaiT's class attention (which `tessera attention-map` draws) are the library's own.
#pragma once
#include <tessera/models/cait.h>
#include <tessera/models/registry.h>
#include <tessera/nn/mlp.h>
#include <tessera/nn/patch_embed.h>

#include "linear_attention.h"

namespace custom {

struct LinearVitConfig {
  int64_t img_size = 28, patch_size = 4, in_chans = 1, num_classes = 10;
  int64_t embed_dim = 96, depth = 4, num_heads = 4;
  double mlp_ratio = 4.0, drop_rate = 0.0;
};

// Pre-norm transformer block with the linear attention as its token mixer.
class LinearAttentionBlock : public tessera::nn::Module {
 public:
  LinearAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double drop);
  tessera::Tensor forward(const tessera::Tensor& x) override;
  std::string type_name() const override { return "LinearAttentionBlock"; }
  std::shared_ptr<tessera::nn::LayerNorm> norm1, norm2;
  std::shared_ptr<LinearAttention> attn;
  std::shared_ptr<tessera::nn::Mlp> mlp;
};

class LinearVit : public tessera::models::Model {
 public:
  explicit LinearVit(const LinearVitConfig& config);
  tessera::Tensor forward(const tessera::Tensor& images) override;
  std::string type_name() const override { return "LinearVit"; }

  LinearVitConfig config;
  tessera::Tensor cls_token, pos_embed;
  std::shared_ptr<tessera::nn::PatchEmbed> patch_embed;
  std::shared_ptr<tessera::nn::ModuleList<LinearAttentionBlock>> blocks;
  std::shared_ptr<tessera::nn::ModuleList<tessera::models::LayerScaleClassAttentionBlock>> blocks_token_only;
  std::shared_ptr<tessera::nn::LayerNorm> norm;
  std::shared_ptr<tessera::nn::Linear> head;
};

// Registers "linear_vit_tiny" (the config above; --img-size, --in-chans, --num-classes, the drop
// rate and --model-kwargs depth/embed_dim/num_heads/mlp_ratio change it), so that every `tessera`
// command built into this program can train, validate and inspect it by name.
void register_linear_vit();

}  // namespace custom
