// The model registry: names, and model_kwargs (timm's --model-kwargs) changing a variant's
// architecture the way timm's create_model(name, **kwargs) does.
#include <catch2/catch.hpp>

#include "models/registry.h"

using namespace tessera;
using namespace tessera::models;

namespace {
ModelOptions with_kwargs(std::map<std::string, double> kwargs) {
  ModelOptions o;
  o.model_kwargs = std::move(kwargs);
  return o;
}
}  // namespace

TEST_CASE("model_kwargs change the architecture as timm's create_model kwargs do", "[models]") {
  // Expected counts: timm 1.0.31, timm.create_model(name, **kwargs), summed numel of parameters.
  CHECK(create_model("xcit_nano_12_p8_224", with_kwargs({{"depth", 4}}))->num_parameters() == 1435160);
  CHECK(create_model("cait_xxs24_224", with_kwargs({{"depth", 6}, {"embed_dim", 128}}))->num_parameters() ==
        1841368);
  CHECK(create_model("coat_tiny", with_kwargs({{"parallel_depth", 2}}))->num_parameters() == 3632588);
  // UFO-ViT is not in timm: depth=6 keeps blocks.0-5 and drops the rest.
  const nn::NamedTensors ufo = create_model("ufo_vit_t", with_kwargs({{"depth", 6}, {"attn_dim", 64}}))->state_dict();
  bool has_block5 = false, has_block6 = false;
  for (const auto& [name, t] : ufo) {
    has_block5 |= name.rfind("blocks.5.", 0) == 0;
    has_block6 |= name.rfind("blocks.6.", 0) == 0;
  }
  CHECK(has_block5);
  CHECK(!has_block6);
}

TEST_CASE("model_kwargs reject keys, values and combinations the family cannot take", "[models]") {
  CHECK_THROWS_WITH(create_model("xcit_nano_12_p16_224", with_kwargs({{"depht", 4}})),
                    Catch::Contains("unknown model kwarg 'depht'") && Catch::Contains("depth, embed_dim"));
  CHECK_THROWS_WITH(create_model("coat_lite_tiny", with_kwargs({{"depth", 4}})),
                    Catch::Contains("'depth'") && Catch::Contains("num_heads, parallel_depth"));
  CHECK_THROWS_WITH(create_model("cait_xxs24_224", with_kwargs({{"depth", 2.5}})),
                    Catch::Contains("depth must be an integer in [1, "));
  CHECK_THROWS_WITH(create_model("cait_xxs24_224", with_kwargs({{"mlp_ratio", -1}})),
                    Catch::Contains("mlp_ratio must be in (0, "));
  CHECK_THROWS_WITH(create_model("xcit_nano_12_p16_224", with_kwargs({{"num_heads", 3}})),
                    Catch::Contains("not divisible by num_heads 3"));
}
