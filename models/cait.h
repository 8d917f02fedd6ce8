// CaiT: Class-Attention in Image Transformers (Touvron et al., 2021). Names follow timm's cait.py:
//   16x16 patch embedding + learned positions -> L x LayerScale blocks with talking-heads attention
//   -> 2 x class-attention blocks on a separate class token -> LayerNorm -> head.
// The variants are model files (models/files/cait_*.yaml); Cait is the model the builder makes of
// any spec a CaitConfig can state, with typed handles to its parts.
#pragma once
#include "tessera/models/cait_blocks.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/nn/patch_embed.h"

namespace tessera::models {

struct CaitConfig {
  int64_t img_size = 224, patch_size = 16, embed_dim = 192, depth = 24, num_heads = 4;
  double mlp_ratio = 4.0;
  double init_values = 1e-5;  // LayerScale ε (Table 3)
  int64_t num_classes = 1000, in_chans = 3;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// The spec of a CaitConfig (cait_xxs24_224's file with the config's values).
ModelSpec cait_spec(const CaitConfig& config);

class Cait : public VisionTransformer {
 public:
  explicit Cait(const CaitConfig& config);
  explicit Cait(ModelSpec spec);  // describes(spec) must hold
  static bool describes(const ModelSpec& spec);
  std::string type_name() const override { return "Cait"; }
  CaitConfig config;
  Tensor pos_embed;  // [1, (img_size/patch)², d]
  std::shared_ptr<nn::PatchEmbed> patch_embed;
  std::shared_ptr<nn::ModuleList<LayerScaleBlock>> blocks;
  std::shared_ptr<nn::ModuleList<LayerScaleClassAttentionBlock>> blocks_token_only;
  std::shared_ptr<nn::LayerNorm> norm;
};

}  // namespace tessera::models
