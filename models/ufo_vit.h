// UFO-ViT: Unit Force Operated Vision Transformer (Song 2021, arXiv 2109.14382; retitled
// X-ViT in 2022). No reference implementation exists, so the model is this project's definition
// (docs/ufo_vit.md gives the definition and its reasons): the XCiT skeleton with UFO attention.
//   conv patch embedding -> + learned positions -> L x UFOBlock (UFO attention, depthwise conv,
//   MLP; LayerScale each) -> 2 x CaiT-style UFO class-attention blocks on a class token
//   -> LayerNorm -> head on the class token.
#pragma once
#include "tessera/models/model.h"
#include "tessera/nn/mlp.h"
#include "tessera/nn/patch_embed.h"
#include "tessera/nn/xnorm.h"

namespace tessera::models {

struct UfoVitConfig {
  int64_t img_size = 224, patch_size = 16;
  int64_t embed_dim = 192;  // Table 1 "#Dim" d: the token width
  int64_t attn_dim = 96;    // Table 1 "#Embed" E: the attention's inner width (docs/ufo_vit.md)
  int64_t depth = 24, num_heads = 4;
  double mlp_ratio = 4.0;
  double layer_scale_init = 1e-5;  // the "affine layers" of Fig. 2 as LayerScale
  int64_t num_classes = 1000, in_chans = 3;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// One UFO-ViT layer (Fig. 2), in XCiT's order and naming (attention 1, local 3, MLP 2):
//   x += γ1·UFO(LN(x));  x += γ3·DWConv(LN(x));  x += γ2·MLP(LN(x)).
// DWConv is §3.3's "simple depthwise convolution" (3x3, bias) on the token grid.
class UFOBlock : public nn::Module {
 public:
  UFOBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values, double drop,
           double drop_path);
  Tensor forward(const Tensor& x, int64_t H, int64_t W);  // tokens [B, H·W, d]
  std::string type_name() const override { return "UFOBlock"; }
  Tensor gamma1, gamma3, gamma2;
  std::shared_ptr<nn::LayerNorm> norm1, norm3, norm2;
  std::shared_ptr<nn::UFOAttention> attn;
  std::shared_ptr<nn::Conv2d> local_conv;
  std::shared_ptr<nn::Mlp> mlp;

 private:
  double drop_path_;
};

// CaiT's class-attention block (§3.3 "Class attention") with UFO class attention: the patch tokens
// stay frozen, the FFN and its pre-norm residual apply to the class token only:
//   cls += γ_1·UFO_CA(LN([cls, x]));  cls += γ_2·MLP(LN(cls)).
class UFOClassAttentionBlock : public nn::Module {
 public:
  UFOClassAttentionBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values,
                         double drop);
  Tensor forward(const Tensor& patches, const Tensor& cls);  // -> the new cls [B, 1, d]
  std::string type_name() const override { return "UFOClassAttentionBlock"; }
  Tensor gamma_1, gamma_2;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::UFOClassAttention> attn;
  std::shared_ptr<nn::Mlp> mlp;
};

class UfoVit : public Model {
 public:
  explicit UfoVit(const UfoVitConfig& config);
  // images [B, in_chans, img_size, img_size]: the position table fixes the input size.
  Tensor forward(const Tensor& images) override;
  std::string type_name() const override { return "UfoVit"; }
  // A square pos_embed of another length is resampled to this model's grid (§3.3: bicubic).
  nn::NamedTensors adapt_state_dict(nn::NamedTensors state) const override;
  UfoVitConfig config;
  Tensor cls_token, pos_embed;  // [1, 1, d], [1, (img_size/patch)², d]
  std::shared_ptr<nn::ConvPatchEmbed> patch_embed;
  std::shared_ptr<nn::ModuleList<UFOBlock>> blocks;
  std::shared_ptr<nn::ModuleList<UFOClassAttentionBlock>> cls_attn_blocks;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace tessera::models
