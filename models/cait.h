// CaiT: Class-Attention in Image Transformers (Touvron et al., 2021). Names follow timm's cait.py:
//   16x16 patch embedding + learned positions -> L x LayerScale blocks with talking-heads attention
//   -> 2 x class-attention blocks on a separate class token -> LayerNorm -> head.
#pragma once
#include "tessera/models/model.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/mlp.h"
#include "tessera/nn/patch_embed.h"
#include "tessera/nn/talking_heads.h"

namespace tessera::models {

struct CaitConfig {
  int64_t img_size = 224, patch_size = 16, embed_dim = 192, depth = 24, num_heads = 4;
  double mlp_ratio = 4.0;
  double init_values = 1e-5;  // LayerScale ε (Table 3)
  int64_t num_classes = 1000, in_chans = 3;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// Eq. 4: x' = x + diag(λ)·SA(η(x)),  x'' = x' + diag(λ')·FFN(η(x')), SA with talking heads.
class LayerScaleBlock : public nn::Module {
 public:
  LayerScaleBlock(int64_t dim, int64_t heads, double mlp_ratio, double init_values, double drop, double drop_path);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerScaleBlock"; }
  Tensor gamma_1, gamma_2;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::TalkingHeadAttention> attn;
  std::shared_ptr<nn::Mlp> mlp;

 private:
  double drop_path_;
};

// §3: the class token is updated from [cls, patches]; the patch tokens stay frozen; the FFN and
// its pre-norm residual apply to the class token only.
class LayerScaleClassAttentionBlock : public nn::Module {
 public:
  LayerScaleClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double init_values, double drop);
  Tensor forward(const Tensor& patches, const Tensor& cls);  // -> the new cls [B, 1, d]
  std::string type_name() const override { return "LayerScaleBlockClassAttn"; }
  Tensor gamma_1, gamma_2;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::ClassAttention> attn;
  std::shared_ptr<nn::Mlp> mlp;
};

class Cait : public Model {
 public:
  explicit Cait(const CaitConfig& config);
  Tensor forward(const Tensor& images) override;
  std::string type_name() const override { return "Cait"; }
  // A square pos_embed of another length is resampled to this model's grid (bicubic, as timm).
  nn::NamedTensors adapt_state_dict(nn::NamedTensors state) const override;
  CaitConfig config;
  Tensor cls_token, pos_embed;
  std::shared_ptr<nn::PatchEmbed> patch_embed;
  std::shared_ptr<nn::ModuleList<LayerScaleBlock>> blocks;
  std::shared_ptr<nn::ModuleList<LayerScaleClassAttentionBlock>> blocks_token_only;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace tessera::models
