#include "tessera/models/cait.h"

#include "tessera/models/model_file.h"
#include "tessera/models/one_stage_config.h"

namespace tessera::models {

namespace {

CaitConfig cait_config_of(const ModelSpec& s) { return one_stage_config_of<CaitConfig>(s, &CaitConfig::init_values); }

}  // namespace

ModelSpec cait_spec(const CaitConfig& c) {
  TS_CHECK(c.patch_size > 0 && c.img_size % c.patch_size == 0, "Cait: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  static const ModelSpec base = config_template("cait_xxs24_224", "CaitConfig");
  return one_stage_spec(base, c, &CaitConfig::init_values);
}

bool Cait::describes(const ModelSpec& s) { return one_stage_describes(s, cait_spec, cait_config_of); }

Cait::Cait(const CaitConfig& c) : Cait(cait_spec(c)) {}

Cait::Cait(ModelSpec spec) : VisionTransformer(std::move(spec)) {
  TS_CHECK(describes(this->spec()), "Cait: the spec of ", this->spec().source, " is not a CaitConfig's");
  config = cait_config_of(this->spec());
  pos_embed = stages[0].pos_embed;
  patch_embed = std::dynamic_pointer_cast<nn::PatchEmbed>(stages[0].patch_embed);
  blocks = typed_view<LayerScaleBlock>(stages[0].blocks);
  blocks_token_only = typed_view<LayerScaleClassAttentionBlock>(token_only_blocks);
  norm = norms[0];
}

}  // namespace tessera::models
