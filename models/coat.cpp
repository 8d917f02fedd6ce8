#include "tessera/models/coat.h"

#include "tessera/models/model_file.h"

namespace tessera::models {

namespace {

constexpr int64_t kTotalStride = 32;  // patch 4, then three stride-2 merges

CoatConfig coat_config_of(const ModelSpec& s) {
  CoatConfig c;
  c.img_size = s.img_size;
  c.in_chans = s.in_chans;
  c.num_heads = s.stages.at(0).blocks.at(0).num_heads;
  for (size_t i = 0; i < 4; ++i) {
    const StageSpec& st = s.stages.at(i);
    c.embed_dims[i] = st.embed_dim;
    c.serial_depths[i] = st.blocks.at(0).repeat;
    c.mlp_ratios[i] = st.blocks.at(0).mlp_ratio;
  }
  c.parallel_depth = s.parallel_blocks.repeat;
  c.num_classes = s.num_classes;
  c.drop_rate = s.drop_rate;
  c.drop_path_rate = s.drop_path_rate;
  return c;
}

}  // namespace

ModelSpec coat_spec(const CoatConfig& c) {
  TS_CHECK(c.img_size > 0 && c.img_size % kTotalStride == 0, "Coat: img_size must be a positive multiple of ",
           kTotalStride, " (patch 4 and three stride-2 merges), got ", c.img_size);
  for (int s = 0; s < 4; ++s) {
    TS_CHECK(c.num_heads > 0 && c.embed_dims[s] > 0 && c.embed_dims[s] % c.num_heads == 0, "Coat: embed_dims[", s,
             "] = ", c.embed_dims[s], " is not divisible by num_heads ", c.num_heads);
    TS_CHECK(c.serial_depths[s] >= 0 && c.mlp_ratios[s] > 0, "Coat: stage ", s + 1, " has depth ", c.serial_depths[s],
             " and mlp ratio ", c.mlp_ratios[s]);
  }
  TS_CHECK(c.parallel_depth >= 0, "Coat: parallel_depth must be non-negative, got ", c.parallel_depth);
  if (c.parallel_depth > 0)
    TS_CHECK(c.embed_dims[1] == c.embed_dims[2] && c.embed_dims[2] == c.embed_dims[3] &&
                 c.mlp_ratios[1] == c.mlp_ratios[2] && c.mlp_ratios[2] == c.mlp_ratios[3],
             "Coat: parallel blocks need equal embed dims and mlp ratios in stages 2-4, got dims ", c.embed_dims[1],
             ", ", c.embed_dims[2], ", ", c.embed_dims[3], " and ratios ", c.mlp_ratios[1], ", ", c.mlp_ratios[2], ", ",
             c.mlp_ratios[3]);
  static const ModelSpec base = config_template("coat_lite_tiny", "CoatConfig");
  ModelSpec s = base;
  s.img_size = c.img_size;
  s.in_chans = c.in_chans;
  s.num_classes = c.num_classes;
  s.drop_rate = c.drop_rate;
  s.drop_path_rate = c.drop_path_rate;
  for (size_t i = 0; i < 4; ++i) {
    StageSpec& st = s.stages[i];
    st.embed_dim = c.embed_dims[i];
    st.blocks[0].repeat = c.serial_depths[i];
    st.blocks[0].num_heads = c.num_heads;
    st.blocks[0].mlp_ratio = c.mlp_ratios[i];
  }
  s.parallel_blocks.repeat = c.parallel_depth;
  if (c.parallel_depth > 0) s.parallel_blocks.mlp_ratio = c.mlp_ratios[1];
  return s;
}

bool Coat::describes(const ModelSpec& s) {
  bool readable = s.stages.size() == 4;
  for (const StageSpec& st : s.stages) readable = readable && st.blocks.size() == 1;
  try {
    return readable && same_architecture(coat_spec(coat_config_of(s)), s);
  } catch (const Error&) {  // values the config cannot state (an img_size that is not a multiple of 32)
    return false;
  }
}

Coat::Coat(const CoatConfig& c) : Coat(coat_spec(c)) {}

Coat::Coat(ModelSpec spec) : VisionTransformer(std::move(spec)) {
  TS_CHECK(describes(this->spec()), "Coat: the spec of ", this->spec().source, " is not a CoatConfig's");
  config = coat_config_of(this->spec());
  for (size_t i = 0; i < 4; ++i) serial_blocks[i] = typed_view<CoatSerialBlock>(stages[i].blocks);
}

// mlpc-ucsd/CoaT's checkpoints hold norms, an aggregation and a head the variant does not use
// (models/official_keys.h).
const OfficialKeyMap& Coat::official_keys() const {
  static const OfficialKeyMap map{{}, {"norm1", "norm2", "norm3", "norm4", "aggregate", "head"}, {}};
  return map;
}

}  // namespace tessera::models
