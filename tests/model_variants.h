// The models the device and precision tests run: every family at a reduced depth on 32x32 images,
// and the three hybrids of tests/hybrid_models.h. Each is built from one seed, so two builds (on
// two devices, or for two precisions) start from the same weights.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/models/registry.h"
#include "tessera/ops/ops.h"
#include "tests/hybrid_models.h"

namespace tessera::testing {

struct ModelVariant {
  const char* name;
  models::ModelOptions options;
  const char* file = nullptr;  // a hybrid's model file; a named variant's when null
};

inline std::vector<ModelVariant> model_variants() {
  auto o = [](int64_t patch, std::map<std::string, double> kwargs) {
    models::ModelOptions m;
    m.num_classes = 10;
    m.img_size = 32;
    m.patch_size = patch;
    m.model_kwargs = std::move(kwargs);
    return m;
  };
  std::vector<ModelVariant> out = {{"xcit_nano_12_p16_224", o(4, {{"depth", 2}})},
                                   {"cait_xxs24_224", o(8, {{"depth", 2}})},
                                   {"coat_lite_tiny", o(0, {})},
                                   {"ufo_vit_t", o(4, {{"depth", 2}})}};
  for (const HybridModel& h : hybrid_models()) out.push_back({h.name, o(0, {}), h.text});
  return out;
}

// The variant on `device`, with the weights a fixed seed gives.
inline std::shared_ptr<models::Model> build_variant(const ModelVariant& v, Device device) {
  manual_seed(2024);
  models::ModelOptions o = v.options;
  o.device = device;
  return v.file ? models::create_model_from_text(v.file, std::string(v.name) + ".yaml", o)
                : models::create_model(v.name, o);
}

}  // namespace tessera::testing
