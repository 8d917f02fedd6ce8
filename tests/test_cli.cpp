// The `tessera` subcommands called in-process (tools/cli/): predict against the model's own
// forward, including weights trained at another resolution, its input checks, the flag parser,
// and inspect/bench output.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tessera/data/decode.h"
#include "tessera/data/encode.h"
#include "tessera/io/npy.h"
#include "gradcheck.h"
#include "tessera/models/pos_embed.h"
#include "tessera/models/registry.h"
#include "tessera/nn/class_attention.h"
#include "tools/cli/image_input.h"
#include "tessera/io/safetensors.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

using namespace tessera;

namespace {

// A name in the test's working directory that no other test process uses: CTest runs the test
// cases of this file as parallel processes in one directory.
std::string unique_name(const std::string& name) { return "test_cli_" + std::to_string(::getpid()) + "_" + name; }

// Files named by unique_name, removed at the end of each test.
struct TempFiles {
  std::vector<std::string> paths;
  std::string operator()(const std::string& name) {
    paths.push_back(unique_name(name));
    return paths.back();
  }
  ~TempFiles() {
    for (const auto& p : paths) std::remove(p.c_str());
  }
};

}  // namespace

TEST_CASE("tessera predict writes the model's eval-mode logits", "[cli]") {
  TempFiles tmp;
  auto model = models::create_model("xcit_nano_12_p16_224", {.num_classes = 4, .img_size = 32, .patch_size = 4});
  model->eval();
  save_safetensors(tmp("w.safetensors"), model->state_dict());
  Generator gen(3);
  Tensor x = randn({2, 3, 32, 32}, DType::Float32, &gen);
  io::write_npy(tmp("x.npy"), x);
  // The head's size (4) comes from the weights; the resolution from the input.
  CHECK(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--weights", tmp.paths[0],
                          "--input", tmp.paths[1], "--output", tmp("y.npy")}) == 0);
  Tensor y = io::read_npy(tmp.paths[2]);
  NoGradGuard no_grad;
  CHECK(y.shape() == Shape{2, 4});
  CHECK(testing::max_abs_diff(y, model->forward(x)) < 1e-5);
}

TEST_CASE("tessera predict resizes a learned position table to the input's resolution", "[cli]") {
  TempFiles tmp;
  auto at32 = models::create_model("cait_xxs24_224", {.num_classes = 3, .img_size = 32});
  save_safetensors(tmp("w.safetensors"), at32->state_dict());
  Generator gen(5);
  Tensor x = randn({1, 3, 48, 48}, DType::Float32, &gen);
  io::write_npy(tmp("x.npy"), x);
  CHECK(cli::run_predict({"--model", "cait_xxs24_224", "--weights", tmp.paths[0], "--input", tmp.paths[1],
                          "--output", tmp("y.npy")}) == 0);
  // The reference: the same weights loaded into a 48x48 model by Model::load_weights.
  auto at48 = models::create_model("cait_xxs24_224", {.num_classes = 3, .img_size = 48});
  at48->load_weights(at32->state_dict());
  at48->eval();
  NoGradGuard no_grad;
  CHECK(testing::max_abs_diff(io::read_npy(tmp.paths[2]), at48->forward(x)) < 1e-5);
}

TEST_CASE("tessera predict rejects bad inputs with clear errors", "[cli]") {
  TempFiles tmp;
  auto model = models::create_model("xcit_nano_12_p16_224", {.num_classes = 2, .img_size = 32, .patch_size = 4});
  const std::string w = tmp("w.safetensors");
  save_safetensors(w, model->state_dict());
  const std::string x64 = tmp("x64.npy"), x3d = tmp("x3d.npy"), rect = tmp("rect.npy"), y = tmp("y.npy");
  io::write_npy(x64, randn({1, 3, 32, 32}, DType::Float64));
  io::write_npy(x3d, randn({3, 32, 32}));
  io::write_npy(rect, randn({1, 3, 32, 48}));
  auto predict = [&](const std::string& input, const std::string& model_name = "xcit_nano_12_p16_224") {
    return cli::run_predict({"--model", model_name, "--patch-size", "4", "--weights", w, "--input", input, "--output", y});
  };
  CHECK_THROWS_WITH(predict(x64), Catch::Contains("x64.npy") && Catch::Contains("float64") &&
                                      Catch::Contains("expected float32"));
  CHECK_THROWS_WITH(predict(x3d), Catch::Contains("[3, 32, 32]") && Catch::Contains("expected [B, 3, R, R]"));
  CHECK_THROWS_WITH(predict(rect), Catch::Contains("[1, 3, 32, 48]"));
  // Weights of another model: every mismatch is reported, with the file's name.
  io::write_npy(tmp("x.npy"), randn({1, 3, 32, 32}));
  CHECK_THROWS_WITH(predict(tmp.paths.back(), "xcit_tiny_12_p16_224"),
                    Catch::Contains("w.safetensors") && Catch::Contains("xcit_tiny_12_p16_224") &&
                        Catch::Contains("cls_token"));
  CHECK_THROWS_WITH(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--input", x64}),
                    Catch::Contains("--weights") && Catch::Contains("required"));
}

TEST_CASE("ArgParser: values, defaults, switches and errors", "[cli]") {
  cli::ArgParser p("demo", "A demo command.");
  p.option("--lr", "LR", "learning rate", "0.001");
  p.option("--batch-size", "B", "batch", "32", "-b");
  p.option("--name", "NAME", "a name");
  p.flag("--json", "json output");
  CHECK(p.parse({"-b", "64", "--name=x y", "--json"}));
  CHECK(p.get_int("--batch-size") == 64);
  CHECK(p.get_double("--lr") == 0.001);
  CHECK(!p.given("--lr"));
  CHECK(p.get("--name") == "x y");
  CHECK(p.is_set("--json"));
  CHECK(p.values()[0] == std::pair<std::string, std::string>{"lr", "0.001"});
  CHECK(p.values()[1] == std::pair<std::string, std::string>{"batch_size", "64"});
  CHECK(p.values()[3] == std::pair<std::string, std::string>{"json", "true"});
  CHECK(p.usage().find("-b, --batch-size B") != std::string::npos);

  cli::ArgParser q("demo", "");
  q.option("--lr", "LR", "learning rate", "0.1");
  q.flag("--json", "");
  CHECK_THROWS_WITH(q.parse({"--lrr", "1"}), Catch::Contains("unknown option '--lrr'") && Catch::Contains("demo"));
  CHECK_THROWS_WITH(cli::ArgParser(q).parse({"--lr"}), Catch::Contains("--lr needs a value"));
  cli::ArgParser last(q);
  last.parse({"--lr", "1", "--lr", "2"});  // the last value wins, as in argparse
  CHECK(last.get_double("--lr") == 2);
  CHECK_THROWS_WITH(cli::ArgParser(q).parse({"--json=1"}), Catch::Contains("takes no value"));
  cli::ArgParser r(q);
  r.parse({"--lr", "fast"});
  CHECK_THROWS_WITH(r.get_double("--lr"), Catch::Contains("--lr") && Catch::Contains("'fast'"));
  CHECK_THROWS_WITH(r.get_int("--lr"), Catch::Contains("expected an integer"));

  cli::ArgParser m("demo", "");  // a list option takes arguments up to the next flag (nargs='*')
  m.list_option("--model-kwargs", "KEY=VALUE", "");
  m.option("--lr", "LR", "", "0.1");
  m.parse({"--model-kwargs", "depth=6", "embed_dim=128", "--lr", "2"});
  CHECK(m.get("--model-kwargs") == "depth=6 embed_dim=128");
  CHECK(m.get_double("--lr") == 2);
}

TEST_CASE("tessera inspect --model-kwargs: the architecture changes; malformed pairs are errors", "[cli]") {
  const cli::Argv base = {"--model", "xcit_nano_12_p16_224", "--num-classes", "10", "--json", "--model-kwargs"};
  auto inspect = [&](const std::string& kwargs) {
    cli::Argv args = base;
    args.push_back(kwargs);
    return cli::run_inspect(args);
  };
  CHECK(inspect("depth=4,embed_dim=64") == 0);
  CHECK_THROWS_WITH(inspect("depth"), Catch::Contains("--model-kwargs: expected KEY=VALUE, got 'depth'"));
  CHECK_THROWS_WITH(inspect("depth=six"), Catch::Contains("depth needs a number, got 'six'"));
  CHECK_THROWS_WITH(inspect("dpeth=4"), Catch::Contains("unknown model kwarg 'dpeth'"));
}

namespace {
// A gray-gradient test picture with a bright square, as a PNG.
std::string write_picture(TempFiles& tmp, const std::string& name, int64_t size, int64_t offset) {
  data::Image img(size, size, 3);
  for (int64_t y = 0; y < size; ++y)
    for (int64_t x = 0; x < size; ++x)
      for (int c = 0; c < 3; ++c)
        img.at(y, x)[c] = static_cast<uint8_t>((x + y) * 2 + c * 20 + ((y > offset && y < offset + 8) ? 100 : 0));
  const std::string path = tmp(name);
  data::write_png(path, img);
  return path;
}
}  // namespace

TEST_CASE("tessera predict takes image files through the evaluation transform", "[cli]") {
  TempFiles tmp;
  auto model = models::create_model("xcit_nano_12_p16_224", {.num_classes = 3, .img_size = 32, .patch_size = 4});
  model->eval();
  const std::string w = tmp("w.safetensors");
  save_safetensors(w, model->state_dict());
  const std::string a = write_picture(tmp, "a.png", 40, 5), b = write_picture(tmp, "b.png", 36, 20);
  const std::string names = tmp("names.txt"), y = tmp("y.npy");
  { std::ofstream(names) << "cat\ndog\nbird\n"; }
  CHECK(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--img-size", "32", "--weights", w,
                          "--input", a + "," + b, "--class-names", names, "--output", y}) == 0);
  // The reference: the same decode + eval transform (resize 32/0.875 = 36, center crop 32).
  data::TransformOptions t;
  t.img_size = 32;
  Tensor batch = cli::load_image_batch({a, b}, t);
  CHECK(batch.shape() == Shape{2, 3, 32, 32});
  NoGradGuard no_grad;
  CHECK(testing::max_abs_diff(io::read_npy(y), model->forward(batch)) < 1e-5);
  { std::ofstream(names) << "cat\ndog\n"; }
  CHECK_THROWS_WITH(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--img-size", "32",
                                      "--weights", w, "--input", a, "--class-names", names}),
                    Catch::Contains("2 names") && Catch::Contains("3 classes"));
  CHECK_THROWS_WITH(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--img-size", "32",
                                      "--weights", w, "--input", tmp("missing.png")}),
                    Catch::Contains("missing.png"));
}

TEST_CASE("tessera attention-map writes one map per head of the last class attention", "[cli]") {
  TempFiles tmp;
  auto model = models::create_model("xcit_nano_12_p16_224", {.num_classes = 3, .img_size = 32, .patch_size = 4});
  const std::string w = tmp("w.safetensors");
  save_safetensors(w, model->state_dict());
  const std::string img = write_picture(tmp, "in.png", 32, 10);
  const std::string dir = unique_name("maps");
  std::filesystem::remove_all(dir);
  CHECK(cli::run_attention_map({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--img-size", "32",
                                "--crop-pct", "1", "--weights", w, "--image", img, "--output", dir}) == 0);
  for (const char* f : {"head0.png", "head3.png", "mean.png", "input.png"}) {
    const data::Image map = data::decode_image(dir + "/" + f);
    CHECK(map.height == 32);
    CHECK(map.width == 32);
  }
  CHECK(!std::filesystem::exists(dir + "/head4.png"));  // xcit_nano has 4 heads
  std::filesystem::remove_all(dir);
  // The captured attention is a distribution over [CLS, patches] per head.
  nn::ClassAttention ca(8, 2);
  ca.keep_attention = true;
  ca.forward(randn({1, 5, 8}));
  CHECK(testing::max_abs_diff(sum(ca.last_attention, {-1}), ones({1, 2, 1})) < 1e-6);
  // CoaT has no class attention to show.
  auto coat = models::create_model("coat_lite_tiny", {.num_classes = 3, .img_size = 32});
  save_safetensors(w, coat->state_dict());
  CHECK_THROWS_WITH(cli::run_attention_map({"--model", "coat_lite_tiny", "--weights", w, "--image", img}),
                    Catch::Contains("no softmax class attention"));
}

TEST_CASE("tessera train --pretrained-weights loads the body and re-initializes another-sized head", "[cli]") {
  TempFiles tmp;
  const std::string dir = unique_name("finetune");
  std::filesystem::remove_all(dir);
  // "Pretrained" for 1000 classes; fine-tuned on Fashion-MNIST's 10 with a zero learning rate, so
  // the saved body must equal the pretrained one exactly.
  auto pretrained = models::create_model("coat_lite_tiny", {.num_classes = 1000, .img_size = 32, .in_chans = 1});
  const std::string w = tmp("pre.safetensors");
  save_safetensors(w, pretrained->state_dict());
  const cli::Argv common{"--model", "coat_lite_tiny", "--img-size", "32", "--epochs", "1", "-b", "8",
                         "--max-train-batches", "1", "--max-eval-batches", "1", "--lr", "0", "--warmup-epochs", "0",
                         "--min-lr", "0", "--workers", "0", "--output", dir};
  cli::Argv args = common;
  args.insert(args.end(), {"--pretrained-weights", w});
  CHECK(cli::run_train(args) == 0);
  const nn::NamedTensors saved = load_safetensors(dir + "/last.safetensors");
  const nn::NamedTensors original = pretrained->state_dict();
  REQUIRE(saved.size() == original.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    INFO(saved[i].first);
    if (saved[i].first.rfind("head.", 0) == 0) {
      CHECK(saved[i].second.size(0) == 10);
    } else if (saved[i].second.dtype() == DType::Float32 && saved[i].first.find("running_") == std::string::npos) {
      CHECK(testing::max_abs_diff(saved[i].second, original[i].second) == 0);
    }
  }
  // Weights of another architecture are refused with the file's name and the mismatches.
  auto other = models::create_model("xcit_nano_12_p16_224", {.num_classes = 10, .img_size = 32, .patch_size = 4});
  save_safetensors(w, other->state_dict());
  args = common;
  args.insert(args.end(), {"--pretrained-weights", w});
  CHECK_THROWS_WITH(cli::run_train(args), Catch::Contains("pre.safetensors") && Catch::Contains("does not fit"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("tessera train --crop-padding sets crop_pad's shift; a negative one is refused before training", "[cli]") {
  const std::string dir = unique_name("crop_padding");
  std::filesystem::remove_all(dir);
  const cli::Argv common{"--model", "coat_lite_tiny", "--img-size", "32", "--epochs", "1", "-b", "8",
                         "--max-train-batches", "1", "--max-eval-batches", "1", "--workers", "0",
                         "--primary", "crop_pad", "--output", dir};
  cli::Argv args = common;
  args.insert(args.end(), {"--crop-padding", "2", "--crop-padding-mode", "edge"});
  CHECK(cli::run_train(args) == 0);
  std::ifstream yaml(dir + "/args.yaml");
  const std::string text((std::istreambuf_iterator<char>(yaml)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("crop_padding: 2") && Catch::Contains("crop_padding_mode: edge"));
  std::filesystem::remove_all(dir);

  args = common;
  args.insert(args.end(), {"--crop-padding", "-1"});
  CHECK_THROWS_WITH(cli::run_train(args), Catch::Contains("crop_padding >= 0"));
  args = common;
  args.insert(args.end(), {"--crop-padding-mode", "mirror"});
  CHECK_THROWS_WITH(cli::run_train(args), Catch::Contains("mirror"));
  CHECK_FALSE(std::filesystem::exists(dir + "/last.safetensors"));
  std::filesystem::remove_all(dir);
}
