#include "tessera/models/xcit.h"

#include "tessera/models/model_file.h"
#include "tessera/models/one_stage_config.h"

namespace tessera::models {

namespace {

XcitConfig xcit_config_of(const ModelSpec& s) {
  XcitConfig c = one_stage_config_of<XcitConfig>(s, &XcitConfig::eta);
  c.tokens_norm = s.head.class_attention.tokens_norm;
  return c;
}

}  // namespace

ModelSpec xcit_spec(const XcitConfig& c) {
  TS_CHECK(c.patch_size > 0 && c.img_size % c.patch_size == 0, "Xcit: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  static const ModelSpec base = config_template("xcit_nano_12_p16_224", "XcitConfig");
  ModelSpec s = one_stage_spec(base, c, &XcitConfig::eta);
  s.head.class_attention.tokens_norm = c.tokens_norm;
  return s;
}

bool Xcit::describes(const ModelSpec& s) { return one_stage_describes(s, xcit_spec, xcit_config_of); }

Xcit::Xcit(const XcitConfig& c) : Xcit(xcit_spec(c)) {}

Xcit::Xcit(ModelSpec spec) : VisionTransformer(std::move(spec)) {
  TS_CHECK(describes(this->spec()), "Xcit: the spec of ", this->spec().source, " is not an XcitConfig's");
  config = xcit_config_of(this->spec());
  patch_embed = std::dynamic_pointer_cast<nn::ConvPatchEmbed>(stages[0].patch_embed);
  pos_embed = stages[0].fourier;
  blocks = typed_view<XCABlock>(stages[0].blocks);
  cls_attn_blocks = typed_view<XcitClassAttentionBlock>(class_blocks);
  norm = norms[0];
}

// facebookresearch/xcit's names (models/official_keys.h): its Fourier encoding is "pos_embeder", and
// its class attention projects q, k, v with one Linear.
const OfficialKeyMap& Xcit::official_keys() const {
  static const OfficialKeyMap map{{{"pos_embeder.", "pos_embed."}}, {}, {"cls_attn_blocks.*.attn."}};
  return map;
}

}  // namespace tessera::models
