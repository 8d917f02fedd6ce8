// `tessera explain` (tools/cli/explain.h): for each family a page and its JSON from the command,
// checked by tests/explain_page_check.py (valid, self-contained HTML; the maps' invariants) and
// rendered by headless Chromium with scripts on and off; the numbers against the model's own
// intermediate tensors recomputed here; a run folder as the source of model and weights; bad input
// refused with nothing written.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gradcheck.h"
#include "hybrid_models.h"
#include "tessera/data/decode.h"
#include "tessera/data/encode.h"
#include "tessera/io/safetensors.h"
#include "tessera/models/registry.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/nn/attention.h"
#include "tessera/nn/probe.h"
#include "tessera/ops/ops.h"
#include "tests/reduced_models.h"
#include "tests/temp_dir.h"
#include "tools/cli/commands.h"
#include "tools/cli/explain.h"
#include "tools/cli/explain_papers.h"

using namespace tessera;
using namespace tessera::testing;
using Catch::Contains;

namespace {

// A 40x48 photograph stand-in with structure at several scales (a gradient, a disc, stripes), so
// maps and token norms vary over the image.
std::string write_test_image(const TempDir& dir) {
  data::Image img(40, 48, 3);
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x) {
      uint8_t* p = img.at(y, x);
      const bool disc = (x - 30) * (x - 30) + (y - 14) * (y - 14) < 90;
      p[0] = static_cast<uint8_t>(disc ? 230 : 5 * x);
      p[1] = static_cast<uint8_t>(6 * y);
      p[2] = static_cast<uint8_t>((x / 4) % 2 ? 200 : 40);
    }
  const std::string path = dir.file("photo.png");
  data::write_png(path, img);
  return path;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct FamilyCase {
  std::string family;
  std::vector<std::string> model_args;
};

// Small members of each family (depth cut with --model-kwargs), untrained, at 32x32 pixels; CaiT at
// 64, where its attention's quadratic term already outgrows the linear projections and the
// constant class-token work as the image grows (section 5, checked by explain_page_check.py).
std::vector<FamilyCase> family_cases() {
  return {
      {"xcit",
       {"--model", "xcit_nano_12_p16_224", "--img-size", "32", "--patch-size", "8", "--model-kwargs", "depth=2"}},
      {"cait", {"--model", "cait_xxs24_224", "--img-size", "64", "--model-kwargs", "depth=2"}},
      {"coat", {"--model", "coat_lite_tiny", "--img-size", "32"}},
      {"coat_parallel", {"--model", "coat_tiny", "--img-size", "64", "--model-kwargs", "parallel_depth=1"}},
      {"ufo_vit", {"--model", "ufo_vit_t", "--img-size", "32", "--model-kwargs", "depth=2"}},
  };
}

int run(std::vector<std::string> args) { return cli::run_explain(args); }

// Headless Chromium renders `page` to a PNG; true when it ran. Its log (console messages
// included) goes to `log`. Scripts off is the page without its <script> elements: this Chromium's
// headless mode ignores --disable-javascript and, with blink's scriptEnabled=false, takes no
// screenshot at all.
bool render(const std::string& page, const std::string& png, const std::string& log, bool scripts) {
  std::string shown = page;
  if (!scripts) {
    std::string html = read_text(page);
    for (size_t at; (at = html.find("<script>")) != std::string::npos;)
      html.erase(at, html.find("</script>", at) + 9 - at);
    shown = png + ".html";
    std::ofstream(shown) << html;
  }
  const std::string cmd =
      "chromium --headless --no-sandbox --disable-gpu --no-first-run --enable-logging=stderr "
      "--v=0 --window-size=1200,1600 --virtual-time-budget=2000 --screenshot='" +
      png + "' 'file://" + shown + "' >'" + log + "' 2>&1";
  return std::system(cmd.c_str()) == 0 && std::filesystem::exists(png);
}

}  // namespace

TEST_CASE("explain: each family's page is valid, self-contained and renders in Chromium", "[explain]") {
  TempDir dir;
  const std::string image = write_test_image(dir);
  for (const FamilyCase& c : family_cases()) {
    INFO(c.family);
    const std::string page = dir.file(c.family + ".html"), numbers = dir.file(c.family + ".json");
    std::vector<std::string> args = c.model_args;
    args.insert(args.end(), {"--image", image, "--output", page});
    REQUIRE(run(args) == 0);
    args.back() = numbers;
    args.push_back("--json");
    REQUIRE(run(args) == 0);
    const std::string cmd = "/usr/bin/python3 '" + std::string(TESSERA_SOURCE_DIR) + "/tests/explain_page_check.py' '" +
                            page + "' '" + numbers + "'";
    CHECK(std::system(cmd.c_str()) == 0);
    const std::string html = read_text(page);
    CHECK_THAT(html, Contains("untrained"));

    for (bool scripts : {true, false}) {
      INFO("scripts " << (scripts ? "on" : "off"));
      const std::string png = dir.file(c.family + (scripts ? "-js" : "-nojs") + ".png");
      const std::string log = png + ".log";
      INFO("Chromium is installed by scripts/test.sh (Debian's chromium package); its log: " << read_text(log));
      REQUIRE(render(page, png, log, scripts));
      const std::string messages = read_text(log);
      CHECK(messages.find("CONSOLE") == std::string::npos);  // no console message, errors included
      CHECK(messages.find("Uncaught") == std::string::npos);
      // Not blank: the screenshot has many distinct colours (text, pictures, charts).
      const data::Image shot = data::decode_image(png, 3);
      REQUIRE(shot.width == 1200);
      std::vector<bool> seen(1 << 15);
      int64_t colours = 0;
      for (size_t i = 0; i + 2 < shot.pixels.size(); i += 3) {
        const int key = (shot.pixels[i] >> 3) << 10 | (shot.pixels[i + 1] >> 3) << 5 | (shot.pixels[i + 2] >> 3);
        if (!seen[static_cast<size_t>(key)]) seen[static_cast<size_t>(key)] = true, ++colours;
      }
      CHECK(colours > 200);
    }
  }
}

TEST_CASE("explain: XCiT's maps and token norms are the model's own, recomputed", "[explain]") {
  auto model = xcit_reduced();  // 4 heads of 8 channels, 2x2 patch grid at 32 px
  model->eval();
  Generator gen(5);
  Tensor image = randn({1, 3, 32, 32}, DType::Float32, &gen);
  cli::ExplainInput input;
  input.model_name = "xcit_reduced";
  input.image_path = "random";
  input.image = image;
  input.mean = {0.5, 0.5, 0.5};
  input.std = {0.25, 0.25, 0.25};
  for (int i = 0; i < 10; ++i) input.class_names.push_back("class " + std::to_string(i));
  const cli::Explanation e = cli::explain_model(*model, input);
  REQUIRE(e.blocks.size() == 4);  // 2 XCA blocks, 2 class-attention blocks
  CHECK(e.top5.size() == 5);

  // Block 0 by hand: tokens, LayerNorm, qkv, Q̂ and K̂ normalised over the tokens, softmax(Q̂K̂ᵀ·τ).
  NoGradGuard no_grad;
  int64_t H = 0, W = 0;
  Tensor x = model->patch_embed->forward(image, &H, &W);
  x = x + model->pos_embed->forward(1, H, W);
  const auto& block = (*model->blocks)[0];
  const int64_t N = x.size(1), heads = 4, dh = 8;
  Tensor qkv =
      block->attn->qkv->forward(block->norm1->forward(x)).reshape({1, N, 3, heads, dh}).permute({2, 0, 3, 4, 1});
  auto unit = [](const Tensor& t) { return t / sqrt(sum(t * t, {-1}, true)); };
  Tensor a =
      softmax(matmul(unit(qkv.select(0, 0)), unit(qkv.select(0, 1)).transpose(-2, -1)) * block->attn->temperature, -1);
  const cli::Figure& xca = e.blocks[0].figures.at(0);
  REQUIRE(xca.key == "xca_map");
  REQUIRE(xca.maps.size() == 4);
  for (int64_t h = 0; h < heads; ++h) {
    CHECK(xca.maps[static_cast<size_t>(h)].shape() == Shape{dh, dh});
    CHECK(max_abs_diff(xca.maps[static_cast<size_t>(h)], a.select(0, 0).select(0, h)) < 1e-5);
  }
  const Tensor out = block->forward(x, H, W);
  const Tensor norms = sqrt(sum(out * out, {-1})).reshape({H, W});
  CHECK(max_abs_diff(e.blocks[0].token_norms.at(0), norms) < 1e-4);
  const double update = std::sqrt(sum((out - x) * (out - x)).item()) / std::sqrt(sum(x * x).item());
  CHECK(std::abs(e.blocks[0].relative_updates.at(0) - update) < 1e-4 * update);
  // The class attention of the last block: patches plus the class token's own weight is 1 per head.
  const cli::Figure& ca = e.blocks[3].figures.at(0);
  REQUIRE(ca.key == "class_attention");
  for (size_t h = 0; h < ca.maps.size(); ++h)
    CHECK(std::abs(sum(ca.maps[h]).item() + ca.numbers.at(0).second.at(h) - 1.0) < 1e-5);
}

TEST_CASE("explain: a run folder gives the model, its flags and its best weights", "[explain]") {
  TempDir dir;
  const std::string image = write_test_image(dir);
  auto model = models::create_model(
      "xcit_nano_12_p16_224", {.num_classes = 3, .img_size = 32, .patch_size = 8, .model_kwargs = {{"depth", 1}}});
  save_safetensors(dir.file("run/model_best.safetensors"), model->state_dict());
  std::ofstream(dir.file("run/args.yaml")) << "model: xcit_nano_12_p16_224\nimg_size: 32\npatch_size: 8\n"
                                              "model_kwargs:\n  depth: 1\nnum_classes: 3\nepochs: 5\noutput: runs\n";
  const std::string page = dir.file("page.html");
  REQUIRE(run({"--checkpoint", dir.file("run"), "--image", image, "--output", page}) == 0);
  const std::string html = read_text(page);
  CHECK_THAT(html, Contains("model_best.safetensors"));
  CHECK(html.find("untrained") == std::string::npos);
  CHECK_THAT(html, Contains("block-blocks.0"));
  CHECK(html.find("block-blocks.1") == std::string::npos);  // depth 1, from the run's args.yaml
}

TEST_CASE("explain: bad input is a clear error and nothing is written", "[explain]") {
  TempDir dir;
  const std::string image = write_test_image(dir), page = dir.file("page.html");
  const std::vector<std::string> tiny = {
      "--model", "xcit_nano_12_p16_224", "--img-size", "32", "--model-kwargs", "depth=1", "--output", page};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = tiny;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  CHECK_THROWS_WITH(run(with({"--image", dir.file("missing.jpg")})), Contains("missing.jpg"));
  std::ofstream(dir.file("corrupt.jpg")) << "\xff\xd8\xff\xe0 not a JPEG at all";
  CHECK_THROWS_WITH(run(with({"--image", dir.file("corrupt.jpg")})), Contains("corrupt.jpg"));
  auto cait = models::create_model("cait_xxs24_224", {.num_classes = 3, .img_size = 32});
  save_safetensors(dir.file("cait.safetensors"), cait->state_dict());
  CHECK_THROWS_WITH(run(with({"--image", image, "--weights", dir.file("cait.safetensors")})),
                    Contains("cait.safetensors"));
  CHECK_THROWS_WITH(run({"--model", "no_such_model", "--image", image, "--output", page}), Contains("no_such_model"));
  CHECK_THROWS_WITH(run({"--checkpoint", dir.file("nowhere"), "--image", image, "--output", page}),
                    Contains("nowhere"));
  CHECK(!std::filesystem::exists(page));
}

namespace {

// A fourth hybrid, of plain self-attention: CoaT-Lite's first stage, then ViT's multi-head
// self-attention on two smaller grids (4x4, 2x2), each stage with its class token, no class attention.
constexpr const char* kCoatLiteSelfAttention = R"(tessera_model: 1
name: coat_lite_self_attention
family: coat
num_classes: 5
img_size: 32
stages:
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 4, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: factor_attention, num_heads: 8, mlp_ratio: 2}]}
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 2, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: attention, num_heads: 4, mlp_ratio: 2}]}
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 2, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: attention, num_heads: 4, mlp_ratio: 2}]}
head:
  pool: cls
)";

cli::ExplainInput random_input(int64_t img_size, uint64_t seed) {
  Generator gen(seed);
  cli::ExplainInput input;
  input.model_name = "hybrid";
  input.image_path = "random";
  input.image = randn({1, 3, img_size, img_size}, DType::Float32, &gen);
  input.mean = {0.5, 0.5, 0.5};
  input.std = {0.25, 0.25, 0.25};
  for (int i = 0; i < 5; ++i) input.class_names.push_back("class " + std::to_string(i));
  return input;
}

// The first figure of each block, in order.
std::vector<std::string> first_figures(const cli::Explanation& e) {
  std::vector<std::string> keys;
  for (const cli::BlockView& b : e.blocks) keys.push_back(b.figures.at(0).key);
  return keys;
}

}  // namespace

TEST_CASE("explain: a hybrid model file's page draws each block as its token mixer's paper does",
          "[explain][model_file]") {
  TempDir dir;
  const std::string image = write_test_image(dir);
  struct Case {
    std::string name, text;
    std::vector<std::string> families, figures;
  };
  const std::vector<Case> cases = {
      {"xcit_talking_heads",
       kXcitTalkingHeads,
       {"xcit", "cait"},
       {"xca_map", "xca_map", "attention_before_talking_heads", "attention_before_talking_heads", "class_attention",
        "class_attention"}},
      {"cait_xca", kCaitXca, {"xcit", "cait"}, {"xca_map", "xca_map", "xca_map", "class_attention", "class_attention"}},
      {"coat_lite_class_attention",
       kCoatLiteClassAttention,
       {"coat", "cait"},
       {"context", "context", "context", "context", "class_attention", "class_attention"}},
      {"coat_lite_self_attention",
       kCoatLiteSelfAttention,
       {"coat", "vit"},
       {"context", "self_attention", "self_attention"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string file = dir.file(c.name + ".yaml"), page = dir.file(c.name + ".html"),
                      numbers = dir.file(c.name + ".json");
    std::ofstream(file) << c.text;
    REQUIRE(run({"--model", file, "--image", image, "--output", page}) == 0);
    REQUIRE(run({"--model", file, "--image", image, "--output", numbers, "--json"}) == 0);
    const std::string cmd = "/usr/bin/python3 '" + std::string(TESSERA_SOURCE_DIR) + "/tests/explain_page_check.py' '" +
                            page + "' '" + numbers + "'";
    CHECK(std::system(cmd.c_str()) == 0);
    const std::string html = read_text(page), json = read_text(numbers);
    CHECK_THAT(json, Contains("\"family\": \"hybrid\""));
    for (const std::string& family : c.families) CHECK_THAT(html, Contains(cli::paper_title(family)));

    auto model = models::create_model(file, models::file_values());
    const cli::Explanation e = cli::explain_model(*model, random_input(32, 3));
    CHECK(e.families == c.families);
    CHECK(first_figures(e) == c.figures);
  }
}

TEST_CASE("explain: self-attention rows are the query patch's, recomputed, on every stage's grid",
          "[explain][model_file]") {
  auto model = models::create_model_from_text(kCoatLiteSelfAttention, "hybrid.yaml", models::file_values());
  const cli::Explanation e = cli::explain_model(*model, random_input(32, 7));
  CHECK_THAT(e.note, Contains("centre of the image"));
  auto& vt = dynamic_cast<models::VisionTransformer&>(*model);
  // No softmax class attention: the centre of the image, patch (2, 2) of stage 2's 4x4 grid and
  // (1, 1) of stage 3's 2x2 grid.
  const std::vector<std::pair<int64_t, int64_t>> stage_grid_query = {{4, 2 * 4 + 2}, {2, 1 * 2 + 1}};
  nn::ProbeRecorder probes;
  {
    NoGradGuard no_grad;
    nn::ObserveForward observe(probes);
    model->forward(random_input(32, 7).image);
  }
  NoGradGuard no_grad;
  for (size_t s = 1; s < 3; ++s) {
    INFO("stage " << s + 1);
    const auto& block = (*vt.stages[s].blocks)[0];
    const cli::Figure& f = e.blocks.at(s).figures.at(0);
    REQUIRE(f.key == "self_attention");
    const auto [side, query] = stage_grid_query[s - 1];
    CHECK(f.query_patch == query);
    // By hand from what the block received: CPE, LayerNorm, qkv, softmax(q kᵀ / √d_h) over
    // [class token, patches]; the figure is the query patch's row over the patches.
    const Tensor x = probes.value(*block, "input");  // [1, 1 + side², 16]
    const Tensor y = block->norm1->forward(block->cpe->forward(x, side, side));
    const auto& attn = dynamic_cast<const nn::Attention&>(*block->mixer);
    const int64_t T = x.size(1), heads = 4, dh = 4;
    const Tensor qkv = attn.qkv->forward(y).reshape({1, T, 3, heads, dh}).permute({2, 0, 3, 1, 4});
    const Tensor a = softmax(matmul(qkv.select(0, 0), qkv.select(0, 1).transpose(-2, -1)) * 0.5, -1);  // 1/√4
    REQUIRE(f.maps.size() == 4);
    for (int64_t h = 0; h < heads; ++h) {
      const Tensor row = a.select(0, 0).select(0, h).select(0, 1 + query);
      CHECK(max_abs_diff(f.maps[static_cast<size_t>(h)], row.narrow(0, 1, side * side).reshape({side, side})) < 1e-5);
    }
  }
}

TEST_CASE("explain: a model not built from a model file's blocks is refused by name", "[explain]") {
  class Opaque : public models::Model {
   public:
    Opaque() { num_classes = 2, default_img_size = 32, in_chans = 3; }
    Tensor forward(const Tensor& x) override { return zeros({x.size(0), 2}); }
    std::string type_name() const override { return "Opaque"; }
  };
  Opaque model;
  CHECK(!cli::explainable(model));
  CHECK_THROWS_WITH(cli::explain_model(model, random_input(32, 1)), Contains("Opaque") && Contains("model file"));
}
