// CoaT: Co-Scale Conv-Attentional Image Transformers (Xu et al., 2021). Layout and names follow timm's
// coat.py so timm weights load as they are:
//   4 stages (patch 4, then stride-2 patch merges), each: patch embedding + LayerNorm -> prepend the
//   stage's CLS token -> serial blocks (CPE, conv-attention, MLP; §5.1 "CoaT Serial Block").
//   CoaT-Lite: LayerNorm on stage 4, head on its CLS token.
//   CoaT: then parallel blocks over stages 2-4 with co-scale feature interpolation (§5.1 "CoaT Parallel
//   Block"), LayerNorms on stages 2-4, a Conv1d(3 -> 1, k=1) over their 3 CLS tokens, head.
// The CPE and CRPE of a stage, and the MLP of a parallel block, are single modules registered under
// several names (aliases in state_dict, counted once in parameters()). The input size is fixed by
// img_size, as in timm. The variants are model files (models/files/coat_*.yaml); Coat is the model
// the builder makes of any spec a CoatConfig can state, with typed handles to its blocks.
#pragma once
#include <array>

#include "tessera/models/coat_blocks.h"
#include "tessera/models/official_keys.h"
#include "tessera/models/vision_transformer.h"

namespace tessera::models {

struct CoatConfig {
  int64_t img_size = 224, in_chans = 3, num_heads = 8;
  std::array<int64_t, 4> embed_dims{64, 128, 256, 320};
  std::array<int64_t, 4> serial_depths{2, 2, 2, 2};
  int64_t parallel_depth = 0;  // 0: CoaT-Lite
  std::array<double, 4> mlp_ratios{8, 8, 4, 4};
  int64_t num_classes = 1000;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// The spec of a CoatConfig (coat_lite_tiny's file with the config's values and its parallel blocks).
ModelSpec coat_spec(const CoatConfig& config);

class Coat : public VisionTransformer {
 public:
  explicit Coat(const CoatConfig& config);
  explicit Coat(ModelSpec spec);  // describes(spec) must hold
  static bool describes(const ModelSpec& spec);
  std::string type_name() const override { return "CoaT"; }
  const OfficialKeyMap& official_keys() const override;
  CoatConfig config;
  std::array<std::shared_ptr<nn::ModuleList<CoatSerialBlock>>, 4> serial_blocks;
};

}  // namespace tessera::models
