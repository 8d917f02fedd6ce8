#include "tessera/models/ufo_vit.h"

#include "tessera/models/model_file.h"
#include "tessera/models/one_stage_config.h"

namespace tessera::models {

namespace {

UfoVitConfig ufo_vit_config_of(const ModelSpec& s) {
  UfoVitConfig c = one_stage_config_of<UfoVitConfig>(s, &UfoVitConfig::layer_scale_init);
  c.attn_dim = s.stages.at(0).blocks.at(0).attn_dim;
  return c;
}

}  // namespace

ModelSpec ufo_vit_spec(const UfoVitConfig& c) {
  TS_CHECK(c.patch_size > 0 && c.img_size > 0 && c.img_size % c.patch_size == 0, "UfoVit: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  static const ModelSpec base = config_template("ufo_vit_t", "UfoVitConfig");
  ModelSpec s = one_stage_spec(base, c, &UfoVitConfig::layer_scale_init);
  s.stages[0].blocks[0].attn_dim = c.attn_dim;
  s.head.class_attention.attn_dim = c.attn_dim;
  return s;
}

bool UfoVit::describes(const ModelSpec& s) { return one_stage_describes(s, ufo_vit_spec, ufo_vit_config_of); }

UfoVit::UfoVit(const UfoVitConfig& c) : UfoVit(ufo_vit_spec(c)) {}

UfoVit::UfoVit(ModelSpec spec) : VisionTransformer(std::move(spec)) {
  TS_CHECK(describes(this->spec()), "UfoVit: the spec of ", this->spec().source, " is not a UfoVitConfig's");
  config = ufo_vit_config_of(this->spec());
  pos_embed = stages[0].pos_embed;
  patch_embed = std::dynamic_pointer_cast<nn::ConvPatchEmbed>(stages[0].patch_embed);
  blocks = typed_view<UFOBlock>(stages[0].blocks);
  cls_attn_blocks = typed_view<UFOClassAttentionBlock>(token_only_blocks);
  norm = norms[0];
}

}  // namespace tessera::models
