// The model registry: names, and model_kwargs (timm's --model-kwargs) changing a variant's
// architecture the way timm's create_model(name, **kwargs) does.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tessera/models/registry.h"
#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"

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
  CHECK(create_model("cait_xxs24_224", with_kwargs({{"depth", 6}, {"embed_dim", 128}}))->num_parameters() == 1841368);
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

namespace {
// The smallest model a program could register: a linear head over the mean of each channel.
class ChannelMeanModel : public Model {
 public:
  explicit ChannelMeanModel(const ModelOptions& o) {
    num_classes = o.num_classes;
    in_chans = o.in_chans;
    default_img_size = o.img_size > 0 ? o.img_size : 8;
    head = register_module("head", std::make_shared<nn::Linear>(o.in_chans, o.num_classes));
  }
  Tensor forward(const Tensor& images) override { return head->forward(mean(images, {2, 3})); }
  std::string type_name() const override { return "ChannelMeanModel"; }
  std::shared_ptr<nn::Linear> head;
};
}  // namespace

TEST_CASE("register_model adds a model that create_model and model_names then know", "[models]") {
  register_model("test_channel_mean", [](const ModelOptions& o) { return std::make_shared<ChannelMeanModel>(o); });
  const auto names = model_names();
  CHECK(std::find(names.begin(), names.end(), "test_channel_mean") != names.end());
  ModelOptions o;
  o.num_classes = 5;
  o.in_chans = 2;
  auto model = create_model("test_channel_mean", o);
  CHECK(model->type_name() == "ChannelMeanModel");
  CHECK(model->forward(zeros({3, 2, 4, 4})).shape() == Shape{3, 5});
  // A name can be taken once, built-in names included; bad names and empty factories are refused.
  auto factory = [](const ModelOptions& opt) { return std::make_shared<ChannelMeanModel>(opt); };
  CHECK_THROWS_WITH(register_model("test_channel_mean", factory), Catch::Contains("already registered"));
  CHECK_THROWS_WITH(register_model("xcit_nano_12_p16_224", factory), Catch::Contains("already registered"));
  CHECK_THROWS_WITH(register_model("two words", factory), Catch::Contains("not a usable model name"));
  CHECK_THROWS_WITH(register_model("empty_factory", ModelFactory()), Catch::Contains("is empty"));
  CHECK_THROWS_WITH(create_model("nomodel"), Catch::Contains("`tessera models` lists the names"));
}
