#include "tessera/models/ufo_vit.h"

#include "tessera/models/model_file.h"

namespace tessera::models {

namespace {

UfoVitConfig ufo_vit_config_of(const ModelSpec& s) {
  const StageSpec& st = s.stages.at(0);
  const BlockSpec& b = st.blocks.at(0);
  UfoVitConfig c;
  c.img_size = s.img_size;
  c.patch_size = st.patch_size;
  c.embed_dim = st.embed_dim;
  c.attn_dim = b.attn_dim;
  c.depth = b.repeat;
  c.num_heads = b.num_heads;
  c.mlp_ratio = b.mlp_ratio;
  c.layer_scale_init = b.layer_scale.value_or(0.0);
  c.num_classes = s.num_classes;
  c.in_chans = s.in_chans;
  c.drop_rate = s.drop_rate;
  c.drop_path_rate = s.drop_path_rate;
  return c;
}

}  // namespace

ModelSpec ufo_vit_spec(const UfoVitConfig& c) {
  TS_CHECK(c.patch_size > 0 && c.img_size > 0 && c.img_size % c.patch_size == 0, "UfoVit: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  static const ModelSpec base = config_template("ufo_vit_t", "UfoVitConfig");
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
  b.attn_dim = c.attn_dim;
  b.num_heads = c.num_heads;
  b.mlp_ratio = c.mlp_ratio;
  b.layer_scale = c.layer_scale_init;
  ClassAttentionSpec& ca = s.head.class_attention;
  ca.attn_dim = c.attn_dim;
  ca.num_heads = c.num_heads;
  ca.mlp_ratio = c.mlp_ratio;
  ca.layer_scale = c.layer_scale_init;
  return s;
}

bool UfoVit::describes(const ModelSpec& s) {
  const bool readable = s.stages.size() == 1 && s.stages[0].blocks.size() == 1 && s.head.class_attention.repeat > 0;
  try {
    return readable && same_architecture(ufo_vit_spec(ufo_vit_config_of(s)), s);
  } catch (const Error&) {  // values the config cannot state
    return false;
  }
}

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
