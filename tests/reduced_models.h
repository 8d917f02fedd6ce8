// The reduced configs of timm's parity fixtures (tools/gen_goldens.py builds the same ones with
// timm; tests/goldens/<case>.weights.safetensors holds their weights): small enough to store, every
// kind of parameter of the family present.
#pragma once
#include <memory>

#include "tessera/models/cait.h"
#include "tessera/models/coat.h"
#include "tessera/models/xcit.h"

namespace tessera::testing {

inline std::shared_ptr<models::Xcit> xcit_reduced() {
  models::XcitConfig c;
  c.img_size = 32;
  c.patch_size = 16;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.eta = 0.5;
  c.tokens_norm = true;
  c.num_classes = 10;
  return std::make_shared<models::Xcit>(c);
}

inline std::shared_ptr<models::Cait> cait_reduced() {
  models::CaitConfig c;
  c.img_size = 32;
  c.patch_size = 16;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.init_values = 0.5;
  c.num_classes = 10;
  return std::make_shared<models::Cait>(c);
}

// CoaT-Lite (parallel_depth 0) or CoaT (1).
inline std::shared_ptr<models::Coat> coat_reduced(int64_t parallel_depth) {
  models::CoatConfig c;
  c.img_size = 32;
  c.embed_dims = {16, 16, 16, 16};
  c.serial_depths = {1, 1, 1, 1};
  c.parallel_depth = parallel_depth;
  c.num_heads = 8;
  c.mlp_ratios = {2, 2, 2, 2};
  c.num_classes = 10;
  return std::make_shared<models::Coat>(c);
}

}  // namespace tessera::testing
