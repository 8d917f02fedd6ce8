// Internal to models/: the fields XCiT's, CaiT's and UFO-ViT's config structs share (one stage of
// one block kind, then class attention), read from and written to a model spec in one place. Each
// family adds its own fields (UFO-ViT's attn_dim, XCiT's tokens_norm) and names its LayerScale
// init (eta, init_values, layer_scale_init) by the member pointer it passes.
#pragma once
#include "tessera/core/error.h"
#include "tessera/models/model_spec.h"

namespace tessera::models {

template <class Config>
Config one_stage_config_of(const ModelSpec& s, double Config::*layer_scale) {
  const StageSpec& st = s.stages.at(0);
  const BlockSpec& b = st.blocks.at(0);
  Config c;
  c.img_size = s.img_size;
  c.patch_size = st.patch_size;
  c.embed_dim = st.embed_dim;
  c.depth = b.repeat;
  c.num_heads = b.num_heads;
  c.mlp_ratio = b.mlp_ratio;
  c.*layer_scale = b.layer_scale.value_or(0.0);
  c.num_classes = s.num_classes;
  c.in_chans = s.in_chans;
  c.drop_rate = s.drop_rate;
  c.drop_path_rate = s.drop_path_rate;
  return c;
}

// `base` (the family's template spec) with c's shared fields written in.
template <class Config>
ModelSpec one_stage_spec(ModelSpec s, const Config& c, double Config::*layer_scale) {
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
  b.layer_scale = c.*layer_scale;
  ClassAttentionSpec& ca = s.head.class_attention;
  ca.num_heads = c.num_heads;
  ca.mlp_ratio = c.mlp_ratio;
  ca.layer_scale = c.*layer_scale;
  return s;
}

// Whether a spec is one that the family's config states: one stage of one block entry with class
// attention, and written back from the config read out of it, the same architecture.
template <class ToSpec, class ConfigOf>
bool one_stage_describes(const ModelSpec& s, const ToSpec& to_spec, const ConfigOf& config_of) {
  if (s.stages.size() != 1 || s.stages[0].blocks.size() != 1 || s.head.class_attention.repeat <= 0) return false;
  try {
    return same_architecture(to_spec(config_of(s)), s);
  } catch (const Error&) {  // values the config cannot state
    return false;
  }
}

}  // namespace tessera::models
