// Model files (models/model_file.h, docs/models.md): every named variant's shipped file read,
// written and read back builds the named model; each kind of error names the file, the line and
// the key; ModelOptions change a file's values; and three hybrids no named model is (XCiT with
// talking heads, CaiT with XCA, CoaT-Lite with class attention) train on the CPU, with a float64
// gradient check of tiny ones. tests/cuda/test_models.cpp trains the hybrids on cuda.
#include <cmath>
#include <fstream>
#include <map>

#include "gradcheck.h"
#include "hybrid_models.h"
#include "tessera/models/builder.h"
#include "tessera/models/model_file.h"
#include "tessera/models/registry.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/models/xcit.h"
#include "tessera/nn/init.h"
#include "tessera/ops/ops.h"
#include "tessera/train/optimizer.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::models;

namespace {

std::map<std::string, Shape> shapes_of(const Model& m) {
  std::map<std::string, Shape> out;
  for (const auto& [k, t] : m.state_dict()) out[k] = t.shape();
  return out;
}

std::vector<std::string> keys_of(const Model& m) {
  std::vector<std::string> out;
  for (const auto& [k, t] : m.state_dict()) out.push_back(k);
  return out;
}

// A small valid file; the error cases change one line of it (numbered in the comments).
const std::string kProbe = R"(tessera_model: 1
name: probe
img_size: 32
num_classes: 5
stages:
  - embed_dim: 32
    patch_embed: linear
    patch_size: 8
    pos_embed: learned
    blocks:
      - repeat: 2
        attn: attention
        num_heads: 4
head:
  cls_token: true
  class_attention:
    num_heads: 4
)";

// kProbe with line `line` (1-based) replaced by `text` ("" drops it).
std::string with_line(int line, const std::string& text) {
  std::string out;
  int n = 1;
  size_t start = 0;
  while (start < kProbe.size()) {
    const size_t end = kProbe.find('\n', start);
    const std::string current = kProbe.substr(start, end - start);
    if (n != line) out += current + "\n";
    else if (!text.empty()) out += text + "\n";
    start = end + 1;
    ++n;
  }
  return out;
}

// kProbe with `from` replaced by `to`.
std::string replaced(const std::string& from, const std::string& to) {
  std::string out = kProbe;
  return out.replace(out.find(from), from.size(), to);
}

std::string error_of(const std::string& text, const ModelOptions& options = file_values()) {
  try {
    create_model_from_text(text, "bad.yaml", options);
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

// A few AdamW steps on one fixed batch: the losses, and every parameter's first gradient checked:
// defined, finite and not zero, but for talking heads' proj_l bias, whose gradient is zero in exact
// arithmetic (it adds one constant to a whole row of logits, which the softmax then ignores).
std::vector<double> train_steps(Model& model, int steps) {
  Generator gen(9);
  const Tensor images = rand({4, 3, 32, 32}, DType::Float32, &gen) * 2.0 - 1.0;
  const Tensor labels = from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4});
  auto opt = train::create_optimizer("adamw", train::param_groups(model, 0.05), 4e-3);
  std::vector<double> losses;
  model.train();
  for (int step = 0; step < steps; ++step) {
    Tensor loss = cross_entropy(model.forward(images), labels);
    losses.push_back(loss.item());
    loss.backward();
    if (step == 0)
      for (const auto& [name, p] : model.named_parameters()) {
        INFO(name);
        REQUIRE(p.grad().defined());
        const double g = amax(abs(p.grad())).item();
        CHECK(std::isfinite(g));
        if (name.find("proj_l.bias") == std::string::npos) CHECK(g > 0);
      }
    opt->step();
    opt->zero_grad();
  }
  return losses;
}

}  // namespace

TEST_CASE("every shipped model file, read, written and read again, builds its named model", "[models][model_file]") {
  nn::init::SkipInitGuard counted_not_drawn;  // keys and shapes, not weights
  const std::map<std::string, std::string> family_class{
      {"xcit", "Xcit"}, {"cait", "Cait"}, {"coat", "CoaT"}, {"ufo_vit", "UfoVit"}};
  REQUIRE(shipped_model_files().size() == 50);
  for (const ShippedModelFile& f : shipped_model_files()) {
    INFO(f.name);
    const ModelSpec spec = read_model_file(f.text, std::string(f.name) + ".yaml");
    CHECK(spec.name == f.name);
    CHECK(same_architecture(read_model_file(write_model_file(spec), "written.yaml"), spec));
    const auto named = create_model(f.name);
    CHECK(named->type_name() == family_class.at(spec.family));
    CHECK(named->model_file() == write_model_file(spec));
    const auto rebuilt = create_model_from_text(named->model_file(), "rebuilt.yaml", file_values());
    CHECK(rebuilt->type_name() == named->type_name());
    CHECK(keys_of(*rebuilt) == keys_of(*named));
    CHECK(shapes_of(*rebuilt) == shapes_of(*named));
    CHECK(rebuilt->num_parameters() == named->num_parameters());
    CHECK(model_file_text(f.name) == f.text);
  }
  CHECK_THROWS_WITH(model_file_text("xcit_huge"), Catch::Contains("no model file") && Catch::Contains("xcit_nano"));
}

TEST_CASE("a model file's errors name the file, the line and the key", "[models][model_file][errors]") {
  REQUIRE(error_of(kProbe) == "(no error)");
  // An unknown key, with the nearest known one.
  CHECK_THAT(error_of(with_line(13, "        num_head: 4")),
             Catch::StartsWith("bad.yaml:13: key 'stages[0].blocks[0].num_head': unknown key (did you mean "
                               "'num_heads'?); a block takes repeat, attn, num_heads,"));
  CHECK(error_of(with_line(12, "        attn: atention")) ==
        "bad.yaml:12: key 'stages[0].blocks[0].attn': expected one of attention, talking_heads, xca, "
        "factor_attention, ufo (or a token mixer the program registers: models/token_mixers.h), got 'atention' "
        "(did you mean 'attention'?)");
  CHECK(error_of(with_line(11, "      - repeat: 2\n        repeat: 3")) ==
        "bad.yaml:12: key 'stages[0].blocks[0].repeat': given twice");
  // Wrong types.
  CHECK(error_of(with_line(13, "        num_heads: four")) ==
        "bad.yaml:13: key 'stages[0].blocks[0].num_heads': expected an integer, got 'four'");
  CHECK(error_of(with_line(13, "        num_heads: \"4\"")) ==
        "bad.yaml:13: key 'stages[0].blocks[0].num_heads': expected an integer, got the quoted text '4'");
  CHECK(error_of(replaced("    blocks:\n      - repeat: 2\n        attn: attention\n        num_heads: 4\n",
                          "    blocks: {repeat: 2}\n")) ==
        "bad.yaml:10: key 'stages[0].blocks': expected a list, got a mapping");
  CHECK(error_of(with_line(15, "  cls_token: yes")) ==
        "bad.yaml:15: key 'head.cls_token': expected true or false, got 'yes'");
  // Dimensions that do not divide.
  CHECK(error_of(with_line(13, "        num_heads: 3")) ==
        "bad.yaml:13: key 'stages[0].blocks[0].num_heads': embed_dim 32 is not divisible by num_heads 3");
  CHECK(error_of(with_line(3, "img_size: 36")) ==
        "bad.yaml:8: key 'stages[0].patch_size': img_size 36 is not a multiple of patch size 8");
  // Impossible combinations.
  CHECK(error_of(with_line(12, "        attn: factor_attention")) ==
        "bad.yaml:12: key 'stages[0].blocks[0].attn': factor_attention (CoaT's) leaves the stage's class token out of "
        "its relative positions and needs one: set the stage's cls_token: true");
  CHECK(error_of(with_line(15, "  cls_token: false")) ==
        "bad.yaml:16: key 'head.class_attention': class attention updates a class token: set head.cls_token: true "
        "(or the last stage's cls_token)");
  CHECK(error_of(with_line(9, "    pos_embed: learned\n    cls_token: true")) ==
        "bad.yaml:16: key 'head.cls_token': the last stage has its class token already: a second one is not built");
  CHECK(error_of(with_line(13, "        num_heads: 4\n        local: lpi")) == "(no error)");
  CHECK(error_of(with_line(9, "    pos_embed: conv")) ==
        "bad.yaml:9: key 'stages[0].pos_embed': pos_embed conv (CoaT's convolutional position encoding) passes the "
        "stage's class token through and needs one: set cls_token: true");
  CHECK(error_of(with_line(13, "        num_heads: 4\n        attn_dim: 16")) ==
        "bad.yaml:14: key 'stages[0].blocks[0].attn_dim': attn_dim is UFO attention's inner width; this attention has "
        "none");
  // The version, and text that is not YAML.
  CHECK(error_of(with_line(1, "tessera_model: 2")) ==
        "bad.yaml:1: key 'tessera_model': this build reads model files of version 1, got '2'");
  CHECK(error_of(with_line(1, "")) ==
        "bad.yaml:1: key 'tessera_model': key 'tessera_model' is missing: a model file starts with `tessera_model: 1`");
  CHECK_THAT(error_of(with_line(6, "  - embed_dim: [32")),
             Catch::StartsWith("bad.yaml:") && Catch::Contains(": not a valid YAML file: "));
  CHECK(error_of("") == "bad.yaml: expected a model file (a mapping of keys), got nothing");
  // Sizes no machine holds are refused before anything is allocated.
  CHECK(error_of(with_line(6, "  - embed_dim: 1000000")) ==
        "bad.yaml:6: key 'stages[0].embed_dim': expected an integer in [1, 65536], got 1000000");
  CHECK_THAT(
      error_of(with_line(11, "      - repeat: 4096").replace(kProbe.find("embed_dim: 32"), 13, "embed_dim: 16384")),
      Catch::StartsWith("bad.yaml:5: key 'stages': the model would have about ") &&
          Catch::EndsWith(" parameters, over the limit of 1e+10"));
  // A value ModelOptions set is named as theirs.
  ModelOptions three_heads = file_values();
  three_heads.model_kwargs = {{"num_heads", 3}};
  CHECK(error_of(kProbe, three_heads) ==
        "bad.yaml:13: key 'stages[0].blocks[0].num_heads' (set by ModelOptions): "
        "embed_dim 32 is not divisible by num_heads 3");
  // A file on disk that is not there.
  CHECK_THROWS_WITH(create_model("/nonexistent/model.yaml"),
                    Catch::Contains("model file /nonexistent/model.yaml: cannot be read"));
}

TEST_CASE("ModelOptions change a model file's values, and 0 keeps them", "[models][model_file]") {
  auto m = create_model_from_text(kProbe, "probe.yaml", file_values());
  CHECK(m->num_classes == 5);
  CHECK(m->default_img_size == 32);
  CHECK(create_model_from_text(kProbe, "probe.yaml")->num_classes == 1000);  // ModelOptions' default, timm's
  ModelOptions o = file_values();
  o.img_size = 64;
  o.in_chans = 1;
  o.layer_scale_init = 0.5;
  CHECK_THROWS_WITH(create_model_from_text(kProbe, "probe.yaml", o),
                    Catch::Contains("probe has no LayerScale") && Catch::Contains("layer_scale_init 0.5"));
  o.layer_scale_init = -1;
  o.model_kwargs = {{"depth", 3}, {"embed_dim", 64}};
  auto changed = std::dynamic_pointer_cast<VisionTransformer>(create_model_from_text(kProbe, "probe.yaml", o));
  REQUIRE(changed != nullptr);
  CHECK(changed->stages[0].blocks->size() == 3);
  CHECK(changed->stages[0].pos_embed.shape() == Shape{1, 64, 64});
  CHECK(changed->forward(randn({1, 1, 64, 64})).shape() == Shape{1, 5});
  // model_file() holds what the options changed: it rebuilds the same model by itself.
  auto rebuilt = create_model_from_text(changed->model_file(), "run.yaml", file_values());
  CHECK(shapes_of(*rebuilt) == shapes_of(*changed));
  CHECK(rebuilt->in_chans == 1);
  // depth is offered where the stage has one list entry; the XCiT hybrid has two.
  ModelOptions deeper = file_values();
  deeper.model_kwargs = {{"depth", 6}};
  CHECK_THROWS_WITH(
      create_model_from_text(testing::kXcitTalkingHeads, "hybrid.yaml", deeper),
      Catch::Contains("unknown model kwarg 'depth'") && Catch::Contains("it takes embed_dim, num_heads, mlp_ratio"));
}

TEST_CASE("create_model takes a model file's path, and model_file() rebuilds the model, outputs included",
          "[models][model_file]") {
  testing::TempDir dir;
  const std::string path = dir.file("hybrid.yaml");
  std::ofstream(path) << testing::kCaitXca;
  auto a = create_model(path, file_values());
  CHECK(a->type_name() == "VisionTransformer");
  auto b = create_model_from_text(a->model_file(), "recorded.yaml", file_values());
  b->load_state_dict(a->state_dict());
  a->eval();
  b->eval();
  const Tensor x = randn({2, 3, 32, 32});
  CHECK(testing::max_abs_diff(a->forward(x), b->forward(x)) == 0);
  // A copy of a named variant's file is that variant.
  nn::init::SkipInitGuard counted_not_drawn;
  const std::string copy = dir.file("copy.yaml");
  std::ofstream(copy) << model_file_text("coat_lite_tiny");
  CHECK(keys_of(*create_model(copy)) == keys_of(*create_model("coat_lite_tiny")));
}

TEST_CASE("the builder makes a family's class of a spec its config states, and a VisionTransformer of others",
          "[models][model_file]") {
  nn::init::SkipInitGuard counted_not_drawn;
  ModelSpec spec = shipped_model_spec("xcit_nano_12_p16_224");
  CHECK(build_model(spec)->type_name() == "Xcit");
  // An XCiT whose class attention has no LayerScale is no XcitConfig's: the same builder, the generic class.
  spec.head.class_attention.layer_scale.reset();
  auto other = build_model(spec);
  CHECK(other->type_name() == "VisionTransformer");
  CHECK(shapes_of(*other).count("cls_attn_blocks.0.gamma1") == 0);
  CHECK(shapes_of(*other).count("blocks.11.gamma1") == 1);
  // A config's model is the builder's, key for key.
  XcitConfig c;
  c.embed_dim = 32, c.depth = 2, c.img_size = 32, c.patch_size = 8, c.num_classes = 5;
  Xcit from_config(c);
  auto from_file = create_model_from_text(from_config.model_file(), "xcit.yaml", file_values());
  CHECK(from_file->type_name() == "Xcit");
  CHECK(keys_of(*from_file) == keys_of(from_config));
}

TEST_CASE("three hybrids build and train on the CPU: the loss falls, every parameter gets a gradient",
          "[models][model_file][hybrids]") {
  for (const testing::HybridModel& h : testing::hybrid_models()) {
    INFO(h.name);
    manual_seed(1);
    auto model = create_model_from_text(h.text, std::string(h.name) + ".yaml", file_values());
    CHECK(model->type_name() == "VisionTransformer");  // none of the families' configs states it
    const std::vector<double> losses = train_steps(*model, 8);
    std::ostringstream shown;
    for (double l : losses) shown << " " << l;
    INFO("losses:" << shown.str());
    for (double l : losses) CHECK(std::isfinite(l));
    CHECK(losses.back() < 0.9 * losses.front());
  }
  // Each is what its file says, under its family's timm names.
  nn::init::SkipInitGuard counted_not_drawn;
  const auto xcit = shapes_of(*create_model_from_text(testing::kXcitTalkingHeads, "a.yaml", file_values()));
  CHECK(xcit.count("blocks.1.attn.temperature") == 1);       // XCA
  CHECK(xcit.count("blocks.2.attn.proj_l.weight") == 1);     // talking heads
  CHECK(xcit.count("blocks.3.local_mp.conv1.weight") == 1);  // with XCiT's LPI
  CHECK(xcit.count("cls_attn_blocks.1.gamma1") == 1);
  const auto cait = shapes_of(*create_model_from_text(testing::kCaitXca, "b.yaml", file_values()));
  CHECK(cait.count("blocks.2.attn.temperature") == 1);
  CHECK(cait.count("blocks.2.gamma_1") == 1);
  CHECK(cait.count("blocks_token_only.1.attn.q.weight") == 1);
  CHECK(cait.at("pos_embed") == Shape{1, 16, 32});
  const auto coat = shapes_of(*create_model_from_text(testing::kCoatLiteClassAttention, "c.yaml", file_values()));
  CHECK(coat.count("serial_blocks4.0.factoratt_crpe.qkv.weight") == 1);
  CHECK(coat.count("cls_attn_blocks.1.gamma_2") == 1);
  CHECK(coat.count("cls_token4") == 1);
  CHECK(coat.count("norm4.weight") == 1);
}

// Tiny versions of two hybrids, in float64 (eval mode: BatchNorm on its running statistics).
TEST_CASE("tiny hybrids pass the float64 finite-difference gradient check", "[models][model_file][hybrids]") {
  const std::string xcit_th = R"(tessera_model: 1
num_classes: 3
img_size: 16
stages:
  - {embed_dim: 8, patch_embed: conv_stem, patch_size: 4, pos_embed: fourier,
     blocks: [{attn: xca, num_heads: 2, local: lpi, mlp_ratio: 2, layer_scale: 0.5},
              {attn: talking_heads, num_heads: 2, local: lpi, mlp_ratio: 2, layer_scale: 0.5}]}
head: {cls_token: true, class_attention: {repeat: 1, style: xcit, num_heads: 2, mlp_ratio: 2, layer_scale: 0.5}}
)";
  const std::string coat_ca = R"(tessera_model: 1
num_classes: 3
img_size: 16
stages:
  - {embed_dim: 8, patch_embed: linear_norm, patch_size: 4, pos_embed: conv, cls_token: true, crpe_windows: {3: 1, 5: 1},
     blocks: [{attn: factor_attention, num_heads: 2, mlp_ratio: 2}]}
  - {embed_dim: 8, patch_embed: linear_norm, patch_size: 2, pos_embed: conv, cls_token: true, crpe_windows: {3: 1, 5: 1},
     blocks: [{attn: factor_attention, num_heads: 2, mlp_ratio: 2}]}
head: {class_attention: {repeat: 1, num_heads: 2, mlp_ratio: 2, layer_scale: 0.5}}
)";
  manual_seed(4);
  auto a = std::dynamic_pointer_cast<VisionTransformer>(create_model_from_text(xcit_th, "tiny.yaml", file_values()));
  REQUIRE(a != nullptr);
  a->to(DType::Float64);
  a->eval();
  const MixerBlock& th = *(*a->stages[0].blocks)[1];
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return a->forward(in[0]); },
              {testing::leaf({1, 3, 16, 16}), th.gamma1, th.gamma3,
               (*typed_view<XcitClassAttentionBlock>(a->class_blocks))[0]->attn->q->weight});
  auto b = std::dynamic_pointer_cast<VisionTransformer>(create_model_from_text(coat_ca, "tiny.yaml", file_values()));
  REQUIRE(b != nullptr);
  b->to(DType::Float64);
  b->eval();
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return b->forward(in[0]); },
              {testing::leaf({1, 3, 16, 16}, -1, 1, 2), b->stages[1].cls_token, b->stages[1].cpe->proj->weight,
               (*b->token_only_blocks)[0]->gamma_1});
}
