// UFO-ViT: Unit Force Operated Vision Transformer (Song 2021, arXiv 2109.14382; retitled
// X-ViT in 2022). No reference implementation exists, so the model is this project's definition
// (docs/ufo_vit.md gives the definition and its reasons): the XCiT skeleton with UFO attention.
//   conv patch embedding -> + learned positions -> L x UFOBlock (UFO attention, depthwise conv,
//   MLP; LayerScale each) -> 2 x CaiT-style UFO class-attention blocks on a class token
//   -> LayerNorm -> head on the class token.
// The variants are model files (models/files/ufo_vit_*.yaml); UfoVit is the model the builder makes
// of any spec a UfoVitConfig can state, with typed handles to its parts.
#pragma once
#include "tessera/models/ufo_vit_blocks.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/nn/patch_embed.h"

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

// The spec of a UfoVitConfig (ufo_vit_t's file with the config's values).
ModelSpec ufo_vit_spec(const UfoVitConfig& config);

class UfoVit : public VisionTransformer {
 public:
  explicit UfoVit(const UfoVitConfig& config);
  explicit UfoVit(ModelSpec spec);  // describes(spec) must hold
  static bool describes(const ModelSpec& spec);
  std::string type_name() const override { return "UfoVit"; }
  UfoVitConfig config;
  Tensor pos_embed;  // [1, (img_size/patch)², d]
  std::shared_ptr<nn::ConvPatchEmbed> patch_embed;
  std::shared_ptr<nn::ModuleList<UFOBlock>> blocks;
  std::shared_ptr<nn::ModuleList<UFOClassAttentionBlock>> cls_attn_blocks;
  std::shared_ptr<nn::LayerNorm> norm;
};

}  // namespace tessera::models
