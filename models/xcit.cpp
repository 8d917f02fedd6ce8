#include "tessera/models/xcit.h"

#include "tessera/models/model_file.h"

namespace tessera::models {

namespace {

// The config a spec states, read from where xcit_spec writes it (a spec describes() accepts).
XcitConfig xcit_config_of(const ModelSpec& s) {
  const StageSpec& st = s.stages.at(0);
  const BlockSpec& b = st.blocks.at(0);
  XcitConfig c;
  c.img_size = s.img_size;
  c.patch_size = st.patch_size;
  c.embed_dim = st.embed_dim;
  c.depth = b.repeat;
  c.num_heads = b.num_heads;
  c.mlp_ratio = b.mlp_ratio;
  c.eta = b.layer_scale.value_or(0.0);
  c.tokens_norm = s.head.class_attention.tokens_norm;
  c.num_classes = s.num_classes;
  c.in_chans = s.in_chans;
  c.drop_rate = s.drop_rate;
  c.drop_path_rate = s.drop_path_rate;
  return c;
}

}  // namespace

ModelSpec xcit_spec(const XcitConfig& c) {
  TS_CHECK(c.patch_size > 0 && c.img_size % c.patch_size == 0, "Xcit: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  static const ModelSpec base = config_template("xcit_nano_12_p16_224", "XcitConfig");
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
  b.layer_scale = c.eta;
  ClassAttentionSpec& ca = s.head.class_attention;
  ca.num_heads = c.num_heads;
  ca.mlp_ratio = c.mlp_ratio;
  ca.layer_scale = c.eta;
  ca.tokens_norm = c.tokens_norm;
  return s;
}

bool Xcit::describes(const ModelSpec& s) {
  const bool readable = s.stages.size() == 1 && s.stages[0].blocks.size() == 1 && s.head.class_attention.repeat > 0;
  try {
    return readable && same_architecture(xcit_spec(xcit_config_of(s)), s);
  } catch (const Error&) {  // values the config cannot state
    return false;
  }
}

Xcit::Xcit(const XcitConfig& c) : Xcit(xcit_spec(c)) {}

Xcit::Xcit(ModelSpec spec) : VisionTransformer(std::move(spec)) {
  TS_CHECK(describes(this->spec()), "Xcit: the spec of ", this->spec().source, " is not an XcitConfig's");
  config = xcit_config_of(this->spec());
  patch_embed = std::dynamic_pointer_cast<nn::ConvPatchEmbed>(stages[0].patch_embed);
  pos_embed = stages[0].fourier;
  blocks = typed_view<XCABlock>(stages[0].blocks);
  cls_attn_blocks = xcit_class_blocks;
  norm = norms[0];
}

// facebookresearch/xcit's names (models/official_keys.h): its Fourier encoding is "pos_embeder", and
// its class attention projects q, k, v with one Linear.
const OfficialKeyMap& Xcit::official_keys() const {
  static const OfficialKeyMap map{{{"pos_embeder.", "pos_embed."}}, {}, {"cls_attn_blocks.*.attn."}};
  return map;
}

}  // namespace tessera::models
