#include "tessera/models/cait.h"

#include "tessera/models/model_file.h"

namespace tessera::models {

namespace {

CaitConfig cait_config_of(const ModelSpec& s) {
  const StageSpec& st = s.stages.at(0);
  const BlockSpec& b = st.blocks.at(0);
  CaitConfig c;
  c.img_size = s.img_size;
  c.patch_size = st.patch_size;
  c.embed_dim = st.embed_dim;
  c.depth = b.repeat;
  c.num_heads = b.num_heads;
  c.mlp_ratio = b.mlp_ratio;
  c.init_values = b.layer_scale.value_or(0.0);
  c.num_classes = s.num_classes;
  c.in_chans = s.in_chans;
  c.drop_rate = s.drop_rate;
  c.drop_path_rate = s.drop_path_rate;
  return c;
}

}  // namespace

ModelSpec cait_spec(const CaitConfig& c) {
  TS_CHECK(c.patch_size > 0 && c.img_size % c.patch_size == 0, "Cait: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  static const ModelSpec base = config_template("cait_xxs24_224", "CaitConfig");
  ModelSpec s = base;
  s.img_size = c.img_size;
  s.num_classes = c.num_classes;
  s.in_chans = c.in_chans;
  s.drop_rate = c.drop_rate;
  s.drop_path_rate = c.drop_path_rate;
  StageSpec& st = s.stages[0];
  st.patch_size = c.patch_size;
  st.embed_dim = c.embed_dim;
  BlockSpec& b = st.blocks[0];
  b.repeat = c.depth;
  b.num_heads = c.num_heads;
  b.mlp_ratio = c.mlp_ratio;
  b.layer_scale = c.init_values;
  ClassAttentionSpec& ca = s.head.class_attention;
  ca.num_heads = c.num_heads;
  ca.mlp_ratio = c.mlp_ratio;
  ca.layer_scale = c.init_values;
  return s;
}

bool Cait::describes(const ModelSpec& s) {
  const bool readable = s.stages.size() == 1 && s.stages[0].blocks.size() == 1 && s.head.class_attention.repeat > 0;
  try {
    return readable && same_architecture(cait_spec(cait_config_of(s)), s);
  } catch (const Error&) {  // values the config cannot state
    return false;
  }
}

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
