// XCiT: Cross-Covariance Image Transformers (El-Nouby et al., 2021). Layout and names follow timm's
// xcit.py so timm weights load as they are:
//   conv patch embedding -> + Fourier positions -> L x XCABlock (XCA, LPI, MLP; LayerScale each)
//   -> prepend CLS -> 2 x class-attention blocks -> LayerNorm -> head on the CLS token.
// The variants are model files (models/files/xcit_*.yaml); Xcit is the model the builder makes of
// any spec an XcitConfig can state, with typed handles to its parts (what `tessera explain` and C++
// callers read), and XcitConfig a way to write such a spec in code.
#pragma once
#include "tessera/models/official_keys.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/models/xcit_blocks.h"
#include "tessera/nn/patch_embed.h"

namespace tessera::models {

struct XcitConfig {
  int64_t img_size = 224, patch_size = 16, embed_dim = 192, depth = 12, num_heads = 4;
  double mlp_ratio = 4.0;
  double eta = 1.0;         // LayerScale init (1.0 for 12 layers, 1e-5 for 24)
  bool tokens_norm = true;  // false only for the nano models
  int64_t num_classes = 1000, in_chans = 3;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// The spec of an XcitConfig (xcit_nano_12_p16_224's file with the config's values).
ModelSpec xcit_spec(const XcitConfig& config);

class Xcit : public VisionTransformer {
 public:
  explicit Xcit(const XcitConfig& config);
  explicit Xcit(ModelSpec spec);  // describes(spec) must hold
  // Whether `spec` is an XcitConfig's (xcit_spec of some config): what the builder makes an Xcit of.
  static bool describes(const ModelSpec& spec);
  std::string type_name() const override { return "Xcit"; }
  const OfficialKeyMap& official_keys() const override;
  XcitConfig config;
  std::shared_ptr<nn::ConvPatchEmbed> patch_embed;
  std::shared_ptr<nn::FourierPositionalEncoding> pos_embed;
  std::shared_ptr<nn::ModuleList<XCABlock>> blocks;
  std::shared_ptr<nn::ModuleList<XcitClassAttentionBlock>> cls_attn_blocks;
  std::shared_ptr<nn::LayerNorm> norm;
};

}  // namespace tessera::models
