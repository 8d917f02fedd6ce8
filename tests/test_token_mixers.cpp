// A program's own token mixer in a model file (models/token_mixers.h): registered under a name, a
// block's `attn:` builds it inside MixerBlock like the library's mixers; the file reads, writes and
// reads back; the model trains and explain draws its block; bad names and bad registrations are
// clear errors, and an unknown mixer's error lists the registered ones.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "gradcheck.h"
#include "tessera/models/model_file.h"
#include "tessera/models/registry.h"
#include "tessera/models/token_mixers.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/nn/init.h"
#include "tessera/ops/ops.h"
#include "tessera/train/optimizer.h"
#include "tools/cli/explain.h"

using namespace tessera;
using namespace tessera::models;
using Catch::Contains;

namespace {

// Mixing by the mean over the tokens (a global-pooling mixer, the kind of idea a researcher tries):
// y = proj(x + mean_tokens(x)). It shows explain its mean's weights, 1/T on every token, as its
// "attention" [B, 1, T, T].
class MeanMixer : public nn::Module {
 public:
  explicit MeanMixer(const TokenMixerArgs& a) : args(a) {
    proj = register_module("proj", std::make_shared<nn::Linear>(a.dim, a.dim, a.qkv_bias));
    nn::init_trunc_normal(*proj);
  }
  Tensor forward(const Tensor& x) override {
    nn::ForwardScope scope(*this);
    const int64_t T = x.size(1);
    if (scope.probing()) scope.probe("attention", full({x.size(0), 1, T, T}, 1.0 / static_cast<double>(T)));
    return scope.output(proj->forward(x + mean(x, {1}, true)));
  }
  std::string type_name() const override { return "MeanMixer"; }
  TokenMixerArgs args;
  std::shared_ptr<nn::Linear> proj;
};

void register_mean_mixer() {
  static const bool once = [] {
    register_token_mixer("mean_mixer", [](const TokenMixerArgs& a) { return std::make_shared<MeanMixer>(a); });
    return true;
  }();
  (void)once;
}

// Two blocks of the program's mixer, then one of XCA, CaiT's class attention on top.
constexpr const char* kFile = R"(tessera_model: 1
name: mean_mixer_hybrid
num_classes: 4
img_size: 32
stages:
  - embed_dim: 32
    patch_embed: linear
    patch_size: 8
    pos_embed: learned
    blocks:
      - {repeat: 2, attn: mean_mixer, num_heads: 2, qkv_bias: false, layer_scale: 0.1}
      - {repeat: 1, attn: xca, num_heads: 4}
head:
  cls_token: true
  class_attention: {repeat: 1, num_heads: 4}
)";

}  // namespace

TEST_CASE("a registered token mixer is a model file's attn: read, written, built, trained, explained",
          "[models][model_file][token_mixers]") {
  register_mean_mixer();
  const ModelSpec spec = read_model_file(kFile, "mixer.yaml");
  const BlockSpec& b = spec.stages[0].blocks[0];
  CHECK(b.attn == MixerKind::Registered);
  CHECK(b.registered_attn == "mean_mixer");
  const std::string written = write_model_file(spec);
  CHECK_THAT(written, Contains("attn: mean_mixer"));
  CHECK(same_architecture(read_model_file(written, "written.yaml"), spec));

  manual_seed(3);
  auto model = create_model_from_text(kFile, "mixer.yaml", file_values());
  auto& vt = dynamic_cast<VisionTransformer&>(*model);
  const auto& mixer = dynamic_cast<const MeanMixer&>(*(*vt.stages[0].blocks)[1]->mixer);
  CHECK(mixer.args.dim == 32);  // the block's keys reach the factory
  CHECK(mixer.args.num_heads == 2);
  CHECK(!mixer.args.qkv_bias);
  std::map<std::string, Shape> state;
  for (const auto& [key, t] : model->state_dict()) state[key] = t.shape();
  CHECK(state.count("blocks.1.attn.proj.weight") == 1);  // registered as the block's attn
  CHECK(state.count("blocks.1.attn.proj.bias") == 0);
  CHECK(state.count("blocks.1.gamma1") == 1);  // the block around it is MixerBlock's
  CHECK(state.count("blocks.2.attn.temperature") == 1);

  // A few steps of AdamW: every parameter of the program's mixer gets a gradient, the loss falls.
  Generator gen(4);
  const Tensor images = rand({4, 3, 32, 32}, DType::Float32, &gen) * 2.0 - 1.0;
  const Tensor labels = from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4});
  auto opt = train::create_optimizer("adamw", train::param_groups(*model, 0.05), 4e-3);
  model->train();
  std::vector<double> losses;
  for (int step = 0; step < 8; ++step) {
    Tensor loss = cross_entropy(model->forward(images), labels);
    losses.push_back(loss.item());
    loss.backward();
    if (step == 0)
      for (const Tensor& p : mixer.parameters()) CHECK(amax(abs(p.grad())).item() > 0);
    opt->step();
    opt->zero_grad();
  }
  CHECK(std::isfinite(losses.back()));
  CHECK(losses.back() < 0.9 * losses.front());

  // explain draws its blocks' tokens and updates, says whose mixer it is, and draws the map it shows
  // as the query patch's row over the 4x4 patches (the trunk has no class token: the head adds it).
  cli::ExplainInput input;
  input.model_name = "mean_mixer_hybrid";
  input.image_path = "random";
  input.image = images.narrow(0, 0, 1);
  input.mean = {0.5, 0.5, 0.5};
  input.std = {0.25, 0.25, 0.25};
  input.class_names = {"a", "b", "c", "d"};
  const cli::Explanation e = cli::explain_model(*model, input);
  REQUIRE(e.blocks.size() == 4);
  CHECK_THAT(e.blocks[0].equation, Contains("registered") && Contains("MeanMixer"));
  CHECK(e.blocks[0].token_norms.size() == 1);
  REQUIRE(e.blocks[0].figures.size() == 1);
  const cli::Figure& own = e.blocks[0].figures[0];
  CHECK(own.key == "own_attention");
  REQUIRE(own.maps.size() == 1);
  CHECK(own.maps[0].shape() == Shape{4, 4});
  CHECK(testing::max_abs_diff(own.maps[0], full({4, 4}, 1.0 / 16)) < 1e-7);
  CHECK(own.query_patch == e.query_patch);  // chosen by the class attention, on the same grid
  CHECK(own.query_patch >= 0);
  CHECK(e.blocks[2].figures.at(0).key == "xca_map");
  CHECK(e.families == std::vector<std::string>{"own", "xcit", "cait"});
}

TEST_CASE("token mixer names: an unknown one lists the registered ones; bad registrations are refused",
          "[models][model_file][token_mixers][errors]") {
  register_mean_mixer();
  std::string misspelt = kFile;
  misspelt.replace(misspelt.find("attn: mean_mixer"), 16, "attn: mean_mixr");
  CHECK_THROWS_WITH(read_model_file(misspelt, "mixer.yaml"),
                    Contains("mixer.yaml:11") && Contains("stages[0].blocks[0].attn") &&
                        Contains("attention, talking_heads, xca, factor_attention, ufo, mean_mixer") &&
                        Contains("registered by the program") && Contains("did you mean 'mean_mixer'?"));
  // A spec made in code that names a mixer nobody registered.
  ModelSpec spec = read_model_file(kFile, "mixer.yaml");
  spec.stages[0].blocks[0].registered_attn = "nobody_registered_this";
  CHECK_THROWS_WITH(VisionTransformer(spec), Contains("stages[0].blocks[0].attn") &&
                                                 Contains("no token mixer is registered as 'nobody_registered_this'"));

  const TokenMixerFactory make = [](const TokenMixerArgs& a) { return std::make_shared<MeanMixer>(a); };
  CHECK_THROWS_WITH(register_token_mixer("xca", make), Contains("'xca' is one of the library's token mixers"));
  CHECK_THROWS_WITH(register_token_mixer("mean_mixer", make), Contains("'mean_mixer' is already registered"));
  CHECK_THROWS_WITH(register_token_mixer("my mixer", make), Contains("'my mixer' is not a usable name"));
  CHECK_THROWS_WITH(register_token_mixer("empty", TokenMixerFactory()), Contains("the factory for 'empty' is empty"));
  register_token_mixer("returns_nothing", [](const TokenMixerArgs&) { return std::shared_ptr<nn::Module>(); });
  std::string nothing = kFile;
  nothing.replace(nothing.find("attn: mean_mixer"), 16, "attn: returns_nothing");
  CHECK_THROWS_WITH(create_model_from_text(nothing, "nothing.yaml", file_values()),
                    Contains("token mixer 'returns_nothing' returned no module"));
}
