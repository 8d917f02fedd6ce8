// The `tessera` subcommands called in-process (tools/cli/): predict against the model's own
// forward, including weights trained at another resolution, its input checks, the flag parser,
// and inspect/bench output.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/core/levers.h"
#include "tessera/data/decode.h"
#include "tessera/data/encode.h"
#include "tessera/io/json.h"
#include "tessera/io/npy.h"
#include "gradcheck.h"
#include "hybrid_models.h"
#include "tessera/models/model_file.h"
#include "tessera/train/checkpoint.h"
#include "tessera/models/pos_embed.h"
#include "tessera/models/registry.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/probe.h"
#include "tools/cli/image_input.h"
#include "tessera/io/safetensors.h"
#include "tools/cli/args.h"
#include "tools/cli/attention_picture.h"
#include "tools/cli/commands.h"
#include "tools/cli/summary.h"

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
  CHECK(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--weights", tmp.paths[0], "--input",
                          tmp.paths[1], "--output", tmp("y.npy")}) == 0);
  Tensor y = io::read_npy(tmp.paths[2]);
  NoGradGuard no_grad;
  CHECK(y.shape() == Shape{2, 4});
  CHECK(testing::max_abs_diff(y, model->forward(x)) < 1e-5);
  // NumPy's default float64 is taken too, converted to float32.
  io::write_npy(tmp("x64.npy"), x.to(DType::Float64));
  CHECK(cli::run_predict({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--weights", tmp.paths[0], "--input",
                          tmp.paths[3], "--output", tmp("y64.npy")}) == 0);
  CHECK(testing::max_abs_diff(io::read_npy(tmp.paths[4]), y) < 1e-6);
}

#ifdef TESSERA_ONNX
TEST_CASE("tessera export writes the weights' model as ONNX; --output is required", "[cli]") {
  TempFiles tmp;
  auto model = models::create_model("xcit_nano_12_p16_224", {.num_classes = 4, .img_size = 32, .patch_size = 4});
  save_safetensors(tmp("w.safetensors"), model->state_dict());
  CHECK(cli::run_export({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--img-size", "32", "--weights",
                         tmp.paths[0], "--output", tmp("m.onnx"), "--dynamic-batch"}) == 0);
  // The file holds the weights under timm's names (ONNX Runtime runs such files in test_onnx_export).
  std::ifstream f(tmp.paths[1], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("blocks.11.attn.qkv.weight") != std::string::npos);
  CHECK(bytes.find("batch") != std::string::npos);
  CHECK_THROWS_WITH(cli::run_export({"--model", "xcit_nano_12_p16_224"}), Catch::Contains("--output"));
}
#else
TEST_CASE("tessera export says when the build has no ONNX exporter", "[cli]") {
  CHECK_THROWS_WITH(cli::run_export({"--model", "xcit_nano_12_p16_224", "--output", "unwritten.onnx"}),
                    Catch::Contains("TESSERA_ONNX=OFF") && Catch::Contains("unwritten.onnx"));
}
#endif

TEST_CASE("tessera predict resizes a learned position table to the input's resolution", "[cli]") {
  TempFiles tmp;
  auto at32 = models::create_model("cait_xxs24_224", {.num_classes = 3, .img_size = 32});
  save_safetensors(tmp("w.safetensors"), at32->state_dict());
  Generator gen(5);
  Tensor x = randn({1, 3, 48, 48}, DType::Float32, &gen);
  io::write_npy(tmp("x.npy"), x);
  CHECK(cli::run_predict({"--model", "cait_xxs24_224", "--weights", tmp.paths[0], "--input", tmp.paths[1], "--output",
                          tmp("y.npy")}) == 0);
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
    return cli::run_predict(
        {"--model", model_name, "--patch-size", "4", "--weights", w, "--input", input, "--output", y});
  };
  const std::string i64 = tmp("i64.npy");
  io::write_npy(i64, zeros({1, 3, 32, 32}, DType::Int64));
  CHECK_THROWS_WITH(predict(i64), Catch::Contains("i64.npy") && Catch::Contains("int64") &&
                                      Catch::Contains("float32 or float64 images [B, 3, R, R]"));
  CHECK_THROWS_WITH(predict(x3d), Catch::Contains("[3, 32, 32]") && Catch::Contains("expected [B, 3, R, R]"));
  CHECK_THROWS_WITH(predict(rect), Catch::Contains("[1, 3, 32, 48]"));
  // Weights of another model: every mismatch is reported, with the file's name.
  io::write_npy(tmp("x.npy"), randn({1, 3, 32, 32}));
  CHECK_THROWS_WITH(predict(tmp.paths.back(), "xcit_tiny_12_p16_224"), Catch::Contains("w.safetensors") &&
                                                                           Catch::Contains("xcit_tiny_12_p16_224") &&
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
  for (const char* f : {"head0.png", "head3.png", "mean.png"}) {  // the image's size and the colorbar
    const data::Image map = data::decode_image(dir + "/" + f);
    CHECK(map.height == 32);
    CHECK(map.width == 32 + cli::colorbar_width(32));
  }
  CHECK(data::decode_image(dir + "/input.png").width == 32);  // what the model saw
  CHECK(!std::filesystem::exists(dir + "/head4.png"));        // xcit_nano has 4 heads
  std::filesystem::remove_all(dir);
  // The captured attention is a distribution over [CLS, patches] per head.
  nn::ClassAttention ca(8, 2);
  nn::ProbeRecorder probes;
  {
    nn::ObserveForward observe(probes);
    ca.forward(randn({1, 5, 8}));
  }
  CHECK(testing::max_abs_diff(sum(probes.value(ca, "attention"), {-1}), ones({1, 2, 1})) < 1e-6);
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
  const cli::Argv common{"--model",
                         "coat_lite_tiny",
                         "--img-size",
                         "32",
                         "--epochs",
                         "1",
                         "-b",
                         "8",
                         "--max-train-batches",
                         "1",
                         "--max-eval-batches",
                         "1",
                         "--lr",
                         "0",
                         "--warmup-epochs",
                         "0",
                         "--min-lr",
                         "0",
                         "--workers",
                         "0",
                         "--output",
                         dir};
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
  const cli::Argv common{"--model",
                         "coat_lite_tiny",
                         "--img-size",
                         "32",
                         "--epochs",
                         "1",
                         "-b",
                         "8",
                         "--max-train-batches",
                         "1",
                         "--max-eval-batches",
                         "1",
                         "--workers",
                         "0",
                         "--primary",
                         "crop_pad",
                         "--output",
                         dir};
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

namespace {

// `tessera ARGS...` run in-process through the dispatcher: its exit code, stdout and stderr.
struct CliResult {
  int code;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

CliResult run_tessera(std::vector<std::string> args) {
  args.insert(args.begin(), "tessera");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  const std::string out_path = unique_name("stdout"), err_path = unique_name("stderr");
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  REQUIRE(std::freopen(out_path.c_str(), "w", stdout));
  REQUIRE(std::freopen(err_path.c_str(), "w", stderr));
  const int code = cli::main(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  CliResult r{code, slurp(out_path), slurp(err_path)};
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

// The members of a JSON object that are numbers or strings, as text (nested values are skipped).
std::map<std::string, std::string> json_fields(const std::string& text) {
  json::Reader r(text);
  std::map<std::string, std::string> fields;
  r.begin_object();
  for (std::string key; r.next_member(key);) {
    const json::Kind kind = r.peek();
    if (kind == json::Kind::String) fields[key] = r.read_string();
    else if (kind == json::Kind::Number) fields[key] = std::string(r.read_number());
    else r.skip_value();
  }
  r.finish();
  return fields;
}

}  // namespace

TEST_CASE("tessera inspect --summary: each module's output shape; parameters and MACs add up to the model's", "[cli]") {
  auto xcit = models::create_model(
      "xcit_nano_12_p16_224", {.num_classes = 10, .img_size = 32, .patch_size = 4, .model_kwargs = {{"depth", 2}}});
  xcit->eval();
  auto coat = models::create_model("coat_lite_tiny", {.num_classes = 10, .img_size = 32});
  coat->eval();
  for (models::Model* model : {xcit.get(), coat.get()}) {
    INFO(model->type_name());
    const Tensor image = zeros({1, 3, 32, 32});
    int64_t macs = 0;
    {
      NoGradGuard no_grad;
      FlopCounter counter;
      model->forward(image);
      macs = counter.macs();
    }
    const cli::ModelSummary s = cli::summarize(*model, image);
    CHECK(s.params == model->num_parameters());
    CHECK(s.macs == macs);
    REQUIRE(!s.rows.empty());
    CHECK(s.rows[0].macs == macs);
    CHECK(s.rows[0].params == model->num_parameters());
    CHECK(s.rows[0].output_shapes == std::vector<Shape>{{1, 10}});
    int64_t own = 0, self = 0, top_params = s.rows[0].own_params, top_macs = s.rows[0].self_macs;
    for (const cli::SummaryRow& r : s.rows) {
      own += r.own_params;
      self += r.self_macs;
      CHECK(r.self_macs >= 0);
      if (r.depth == 1) top_params += r.params, top_macs += r.macs;
    }
    CHECK(own == model->num_parameters());
    CHECK(top_params == model->num_parameters());
    CHECK(self == macs);
    CHECK(top_macs == macs);
  }
  // XCiT at 32x32 with 4x4 patches: 64 patch tokens of 128 channels, the class token added later.
  const cli::ModelSummary s = cli::summarize(*xcit, zeros({1, 3, 32, 32}));
  auto row = [&](const std::string& path) -> const cli::SummaryRow& {
    for (const cli::SummaryRow& r : s.rows)
      if (r.path == path) return r;
    FAIL("no row " << path);
    return s.rows[0];
  };
  CHECK(row("patch_embed").output_shapes == std::vector<Shape>{{1, 64, 128}});
  CHECK(row("blocks.1").output_shapes == std::vector<Shape>{{1, 64, 128}});
  CHECK(row("blocks.1").type == "XCABlock");
  CHECK(row("blocks.1.attn.qkv").output_shapes == std::vector<Shape>{{1, 64, 384}});
  CHECK(row("cls_attn_blocks.0").output_shapes == std::vector<Shape>{{1, 65, 128}});
  CHECK(row("blocks.0.mlp.fc1").calls == 0);  // fused into linear_gelu: listed, never called
  CHECK(row("blocks.0.mlp.fc1").params == 128 * 512 + 512);
  CHECK(row("blocks.0.local_mp.conv1").calls == 0);  // fused into depthwise_conv2d_gelu
  CHECK(row("blocks.0.local_mp.conv2").calls == 1);
  // CoaT's convolutional position encodings are shared by a stage's blocks: counted once.
  const cli::ModelSummary c = cli::summarize(*coat, zeros({1, 3, 32, 32}));
  CHECK(std::any_of(c.rows.begin(), c.rows.end(), [](const cli::SummaryRow& r) { return r.shared; }));

  // The command: text with totals, and the same rows as JSON.
  const cli::Argv args{
      "inspect",      "--model", "xcit_nano_12_p16_224", "--num-classes", "10",       "--img-size", "32",
      "--patch-size", "4",       "--model-kwargs",       "depth=2",       "--summary"};
  const CliResult text = run_tessera(args);
  CHECK(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("  blocks (ModuleList)") && Catch::Contains("    1 (XCABlock)") &&
                           Catch::Contains("[1, 64, 128]") && Catch::Contains("Total params: 886,354"));
  cli::Argv json_args = args;
  json_args.push_back("--json");
  const CliResult js = run_tessera(json_args);
  CHECK(js.code == 0);
  const auto fields = json_fields(js.out);
  CHECK(fields.at("params") == std::to_string(s.params));
  CHECK(fields.at("flops") == std::to_string(s.macs));
  CHECK_THAT(js.out,
             Catch::Contains("{\"path\": \"blocks.1\", \"type\": \"XCABlock\", \"depth\": 2, \"shared\": false, "
                             "\"calls\": 1, \"output_shapes\": [[1, 64, 128]]"));
  // --depth 1 lists the model's children only.
  cli::Argv shallow = args;
  shallow.insert(shallow.end(), {"--depth", "1"});
  const CliResult top = run_tessera(shallow);
  CHECK(top.code == 0);
  CHECK_THAT(top.out, Catch::Contains("  blocks (ModuleList)") && !Catch::Contains("XCABlock"));
}

TEST_CASE("tessera validate/inspect/bench --json: valid JSON for any path or name", "[cli]") {
  // A checkpoint whose name holds a quote and a backslash, evaluated on a two-class image folder.
  const std::string root = unique_name("json_paths");
  std::filesystem::remove_all(root);
  TempFiles tmp;
  for (const char* cls : {"ant", "bee"}) {
    std::filesystem::create_directories(root + "/data/" + cls);
    std::filesystem::rename(write_picture(tmp, std::string(cls) + ".png", 32, 4),
                            root + "/data/" + cls + "/" + cls + ".png");
  }
  const std::string checkpoint = root + "/we\"ird\\name.safetensors";
  auto model = models::create_model("xcit_nano_12_p16_224", {.num_classes = 2, .img_size = 32, .patch_size = 4});
  save_safetensors(checkpoint, model->state_dict());
  const CliResult r =
      run_tessera({"validate", "--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--checkpoint", checkpoint,
                   "--dataset", "folder", "--data-dir", root + "/data", "--workers", "0", "--crop-pct", "1", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto fields = json_fields(r.out);
  CHECK(fields.at("checkpoint") == checkpoint);
  CHECK(fields.at("samples") == "2");
  std::filesystem::remove_all(root);

  for (const cli::Argv& args :
       {cli::Argv{"inspect", "--model", "xcit_nano_12_p16_224", "--json"},
        cli::Argv{"bench", "--model", "xcit_nano_12_p16_224", "--img-size", "32", "--patch-size", "4", "--batch", "1",
                  "--warmup", "0", "--steps", "1", "--seconds", "0", "--json"}}) {
    const CliResult out = run_tessera(args);
    REQUIRE(out.code == 0);
    CHECK(json_fields(out.out).at("model") == "xcit_nano_12_p16_224");
  }
}

TEST_CASE("tessera train --data-dir without --dataset trains on the image folder it names", "[cli]") {
  // timm's train.py reads a data folder without --dataset as an ImageFolder; so does Tessera, and
  // its first line says so. (Before: Fashion-MNIST's IDX files were looked for in the folder.)
  TempFiles tmp;
  const std::string root = unique_name("data_dir_alone");
  std::filesystem::remove_all(root);
  for (const char* split : {"train", "validation"})
    for (const char* cls : {"ant", "bee", "wasp"})
      for (int i = 0; i < 3; ++i) {
        const std::string dir = root + "/photos/" + split + "/" + cls;
        std::filesystem::create_directories(dir);
        std::filesystem::rename(write_picture(tmp, std::string(cls) + std::to_string(i) + ".png", 32, i),
                                dir + "/" + std::to_string(i) + ".png");
      }
  const CliResult r = run_tessera({"train",
                                   "--model",
                                   "xcit_nano_12_p16_224",
                                   "--img-size",
                                   "32",
                                   "--patch-size",
                                   "8",
                                   "--model-kwargs",
                                   "depth=1",
                                   "--data-dir",
                                   root + "/photos",
                                   "--epochs",
                                   "1",
                                   "-b",
                                   "3",
                                   "--workers",
                                   "0",
                                   "--max-train-batches",
                                   "1",
                                   "--output",
                                   root + "/run"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::StartsWith("dataset: folder at " + root + "/photos (--dataset not given;") &&
                        Catch::Contains("3 classes, 32x32 input; 9 training / 9 evaluation images"));
  CHECK_THAT(slurp(root + "/run/args.yaml"), Catch::Contains("dataset: folder\n") && Catch::Contains("in_chans: 3\n"));
  std::filesystem::remove_all(root);
}

TEST_CASE("tessera: usage errors exit with 2, other failures with 1, each message once prefixed", "[cli]") {
  struct Case {
    cli::Argv args;
    int code;
    std::string message;
  };
  TempFiles tmp;
  const std::string weights = tmp("w.safetensors");
  save_safetensors(
      weights,
      models::create_model("xcit_nano_12_p16_224", {.num_classes = 2, .img_size = 32, .patch_size = 4})->state_dict());
  const std::vector<Case> cases = {
      {{"inspect", "--model", "xcit_nano_12_p16_224", "--imgsize", "32"},
       2,
       "tessera inspect: unknown option '--imgsize'"},
      {{"inspect", "--model"}, 2, "tessera inspect: option --model needs a value (NAME)"},
      {{"inspect", "--model", "xcit_nano_12_p16_224", "--img-size", "big"},
       2,
       "tessera inspect: option --img-size: expected an integer, got 'big'"},
      {{"inspect"}, 2, "tessera inspect: option --model NAME is required"},
      {{"bench", "--model", "xcit_nano_12_p16_224", "--mode", "fast"},
       2,
       "tessera bench: option --mode: expected infer or train, got 'fast'"},
      {{"bench", "--model", "xcit_nano_12_p16_224", "--lever-sweep", "TESSERA_GEMM_BATCH_COPY,FAST"},
       2,
       "tessera bench: option --lever-sweep: 'FAST' is not a lever of core/levers.h"},
      {{"predict", "--model", "xcit_nano_12_p16_224", "--weights", "w.safetensors", "--input", "x.npy"},
       2,
       "tessera predict: option --output Y.npy is required for .npy input"},
      {{"inspect", "--model", "xcit_nano_12_p16_224", "--threads", "-2"}, 2, "option --threads"},
      {{"predict", "--model", "xcit_nano_12_p16_224", "--weights", "w.safetensors", "--input", ","},
       2,
       "option --input: expected a .npy file or comma-separated image files, got ','"},
      {{"attention-map", "--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--weights", weights, "--image",
        "a.png", "--crop-pct", "1.5"},
       2,
       "option --crop-pct: expected a fraction in (0, 1], got 1.5"},
      {{"inspect", "--model", "no_such_model"}, 1, "no_such_model"},
      {{"predict", "--model", "xcit_nano_12_p16_224", "--weights", unique_name("missing.safetensors"), "--input",
        "x.npy", "--output", "y.npy"},
       1,
       "tessera predict: "},
      {{"frobnicate"}, 2, "tessera: unknown command 'frobnicate'"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0] << " " << (c.args.size() > 1 ? c.args.back() : ""));
    const CliResult r = run_tessera(c.args);
    CHECK(r.code == c.code);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    // One prefix: no "tessera predict: predict: ..." and no C++ names.
    CHECK_THAT(r.err,
               !Catch::Contains(": " + c.args[0] + ": ") && !Catch::Contains("ArgParser") && !Catch::Contains("::"));
  }
}

TEST_CASE("tessera COMMAND --help: every default said once; every computing command takes --threads", "[cli]") {
  for (const char* command : {"models", "ops", "inspect", "predict", "bench", "train", "validate", "attention-map"}) {
    INFO(command);
    const CliResult r = run_tessera({command, "--help"});
    CHECK(r.code == 0);
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      INFO(line);
      const size_t first = line.find("default");
      CHECK((first == std::string::npos || line.find("default", first + 1) == std::string::npos));
    }
    if (std::string(command) != "models" && std::string(command) != "ops")
      CHECK_THAT(r.out, Catch::Contains("--threads N"));
  }
}

// Their parsers refuse a flag declared twice (ArgParser), so each builds only with every flag once.
TEST_CASE("tessera COMMAND --help: every command declares each flag once", "[cli]") {
  for (const char* command : {"models", "ops", "inspect", "predict", "bench", "bench-data", "train", "validate",
                              "attention-map", "explain", "convert", "export"}) {
    INFO(command);
    const CliResult r = run_tessera({command, "--help"});
    CHECK(r.code == 0);
    CHECK_THAT(r.err, !Catch::Contains("twice"));
  }
}

TEST_CASE("attention pictures: the map over the image at its own size, gray or colour, with a colorbar", "[cli]") {
  // The crop of the evaluation transform, in the image's coordinates: a 32x48 image at 32 with
  // crop_pct 1 keeps the centre 32x32; twice the size, twice the box.
  const data::Box crop = cli::eval_crop_in_image(32, 48, 32, 1.0);
  CHECK((crop.top == 0 && crop.left == 8 && crop.height == 32 && crop.width == 32));
  const data::Box twice = cli::eval_crop_in_image(64, 96, 32, 1.0);
  CHECK((twice.top == 0 && twice.left == 16 && twice.height == 64 && twice.width == 64));
  Tensor map = zeros({4, 4});
  map.data<float>()[5] = 1;  // one hot patch
  for (int64_t channels : {1, 3}) {
    INFO(channels << " channels");
    data::Image image(32, 48, channels);
    for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(40 + i % 7 * 30);
    const data::Image pic = cli::attention_picture(map, image, crop);
    CHECK(pic.height == 32);
    CHECK(pic.width == 48 + cli::colorbar_width(32));
    CHECK(pic.channels == 3);
    // Outside the crop: the image itself, dimmed; gray stays gray, colour stays colour.
    const uint8_t* src = image.at(0, 0);
    const uint8_t* out = pic.at(0, 0);
    for (int k = 0; k < 3; ++k) CHECK(out[k] == std::lround(0.35 * src[channels == 3 ? k : 0]));
    // The colorbar: red (the maximum) at the top, blue (the minimum) at the bottom.
    const uint8_t* top = pic.at(0, pic.width - 1);
    const uint8_t* bottom = pic.at(31, pic.width - 1);
    CHECK((top[0] > 100 && top[1] < 30 && top[2] < 30));
    CHECK((bottom[2] > 100 && bottom[0] < 30 && bottom[1] < 30));
  }
  // Through the command with a gray model: the picture has the image file's size.
  TempFiles tmp;
  auto model =
      models::create_model("xcit_nano_12_p16_224", {.num_classes = 3, .img_size = 32, .in_chans = 1, .patch_size = 4});
  const std::string w = tmp("w.safetensors");
  save_safetensors(w, model->state_dict());
  const std::string img = write_picture(tmp, "wide.png", 48, 10);
  const std::string dir = unique_name("gray_maps");
  std::filesystem::remove_all(dir);
  CHECK(cli::run_attention_map({"--model", "xcit_nano_12_p16_224", "--patch-size", "4", "--img-size", "32", "--weights",
                                w, "--image", img, "--output", dir}) == 0);
  const data::Image head = data::decode_image(dir + "/head0.png");
  CHECK(head.height == 48);
  CHECK(head.width == 48 + cli::colorbar_width(48));
  std::filesystem::remove_all(dir);
}

namespace {
// One timed training step of a tiny XCiT-Nano at batch 2, with `extra` flags.
CliResult bench_one_train_step(const std::vector<std::string>& extra) {
  std::vector<std::string> args{"bench",      "--model", "xcit_nano_12_p16_224",
                                "--img-size", "32",      "--patch-size",
                                "8",          "--mode",  "train",
                                "--batch",    "2",       "--warmup",
                                "0",          "--steps", "1",
                                "--seconds",  "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_tessera(args);
}
}  // namespace

TEST_CASE("tessera bench --profile prints a kernel table and --trace writes a Chrome trace", "[cli][profiler]") {
  const std::string trace = unique_name("trace") + ".json";
  const CliResult r = bench_one_train_step({"--profile", "--trace", trace});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("profile of 1 step(s):") != std::string::npos);
  CHECK(r.out.find("forward   matmul") != std::string::npos);
  CHECK(r.out.find("LinearBackward > matmul") != std::string::npos);
  CHECK(r.out.find("update    ") != std::string::npos);
  CHECK(r.out.find("outside kernels") != std::string::npos);
  const std::string text = slurp(trace);
  CHECK(text.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", 0) == 0);
  std::remove(trace.c_str());
  // The profile is also part of --json; a count that is not positive is a usage error.
  const CliResult j =
      run_tessera({"bench", "--model", "xcit_nano_12_p16_224", "--img-size", "32", "--patch-size", "8", "--batch", "1",
                   "--warmup", "0", "--steps", "1", "--seconds", "0", "--profile", "--json"});
  REQUIRE(j.code == 0);
  CHECK(j.out.find("\"profile\": [{\"phase\": \"forward\"") != std::string::npos);
  CHECK(run_tessera({"bench", "--model", "xcit_nano_12_p16_224", "--profile", "--profile-steps", "0"}).code == 2);
}

TEST_CASE("tessera bench --lever-sweep times the step with each lever flipped alone, then as set again", "[cli]") {
  const CliResult r = bench_one_train_step({"--lever-sweep", "TESSERA_MEMORY_ORDER_WALKS,TESSERA_CUDA_SYNC", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  // On by default: flipped off; off by default: flipped on.
  CHECK(r.out.find("\"lever_sweep\": [{\"lever\": \"as set\", \"images_per_s\": ") != std::string::npos);
  CHECK(r.out.find("{\"lever\": \"TESSERA_MEMORY_ORDER_WALKS=0\", \"images_per_s\": ") != std::string::npos);
  CHECK(r.out.find("{\"lever\": \"TESSERA_CUDA_SYNC=1\", \"images_per_s\": ") != std::string::npos);
  CHECK(r.out.find("{\"lever\": \"as set, again\", \"images_per_s\": ") != std::string::npos);
  CHECK(levers().memory_order_walks);  // restored
}

namespace {
// `text` written to `path`.
void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}
}  // namespace

TEST_CASE(
    "tessera train on a model file records it: validate, predict, attention-map, explain, --resume and "
    "--initial-checkpoint need no file",
    "[cli][model_file]") {
  // A hybrid (XCiT with talking-heads attention, 5 classes) trained on a 3-class image folder.
  TempFiles tmp;
  const std::string root = unique_name("model_file_run");
  std::filesystem::remove_all(root);
  for (const char* split : {"train", "validation"})
    for (const char* cls : {"ant", "bee", "wasp"})
      for (int i = 0; i < 2; ++i) {
        const std::string dir = root + "/photos/" + split + "/" + cls;
        std::filesystem::create_directories(dir);
        std::filesystem::rename(write_picture(tmp, std::string(cls) + std::to_string(i) + ".png", 32, i * 3),
                                dir + "/" + std::to_string(i) + ".png");
      }
  const std::string file = root + "/hybrid.yaml", run = root + "/run";
  write_text(file, testing::kXcitTalkingHeads);
  const cli::Argv data = {"--data-dir", root + "/photos", "--workers", "0", "--crop-pct", "1"};
  const auto with_data = [&](cli::Argv args) {
    args.insert(args.end(), data.begin(), data.end());
    return args;
  };
  const CliResult trained = run_tessera(
      with_data({"train", "--model", file, "--epochs", "1", "-b", "3", "--max-train-batches", "1", "--output", run}));
  INFO(trained.err);
  REQUIRE(trained.code == 0);
  // The file's 5 classes give way to the dataset's 3, and the run says so.
  CHECK_THAT(trained.err, Catch::Contains(file + ": num_classes 5 -> 3, the dataset's"));

  // model.yaml beside args.yaml, and the same text in both files of every checkpoint.
  const std::string recorded = slurp(run + "/model.yaml");
  CHECK_THAT(recorded, Catch::Contains("num_classes: 3") && Catch::Contains("talking_heads"));
  CHECK(train::read_model_file_metadata(run + "/last.safetensors") == recorded);
  CHECK(train::read_model_file_metadata(run + "/checkpoint-0.safetensors") == recorded);
  CHECK(train::load_checkpoint(run + "/last.safetensors").metadata.at(train::kModelFileKey) == recorded);
  CHECK(models::create_model_from_text(recorded, "model.yaml", models::file_values())->num_classes == 3);

  // Without the file on disk and without --model, the checkpoint rebuilds its model.
  std::filesystem::remove(file);
  std::filesystem::remove(run + "/model.yaml");
  const CliResult validated =
      run_tessera(with_data({"validate", "--checkpoint", run + "/model_best.safetensors", "--json"}));
  INFO(validated.err);
  REQUIRE(validated.code == 0);
  CHECK(json_fields(validated.out).at("model") == "xcit_talking_heads");
  CHECK(json_fields(validated.out).at("samples") == "6");

  // explain --checkpoint: the run's args.yaml names the file, gone now; the weights' recorded file builds it.
  const std::string img = write_picture(tmp, "in.png", 32, 7);
  const CliResult explained =
      run_tessera({"explain", "--checkpoint", run, "--image", img, "--output", root + "/page.html"});
  INFO(explained.err);
  CHECK(explained.code == 0);
  CHECK_THAT(slurp(root + "/page.html"), Catch::Contains("block-blocks.3") && Catch::Contains("talking heads"));

  const CliResult predicted =
      run_tessera({"predict", "--weights", run + "/last.safetensors", "--input", img, "--topk", "2"});
  INFO(predicted.err);
  CHECK(predicted.code == 0);
  CHECK_THAT(predicted.out, Catch::StartsWith(img + "\n"));

  const CliResult mapped = run_tessera({"attention-map", "--weights", run + "/last.safetensors", "--image", img,
                                        "--output", root + "/maps", "--crop-pct", "1"});
  INFO(mapped.err);
  CHECK(mapped.code == 0);
  CHECK(std::filesystem::exists(root + "/maps/head3.png"));

  const CliResult resumed = run_tessera(
      with_data({"train", "--resume", run, "--epochs", "2", "-b", "3", "--max-train-batches", "1", "--output", run}));
  INFO(resumed.err);
  CHECK(resumed.code == 0);
  CHECK_THAT(resumed.err, Catch::Contains("resumed from"));
  CHECK(train::read_model_file_metadata(run + "/checkpoint-1.safetensors") == recorded);
  CHECK(slurp(run + "/model.yaml") == recorded);
  // args.yaml names the model it built: the run folder's model.yaml, which builds it again.
  CHECK_THAT(slurp(run + "/args.yaml"), Catch::Contains("\nmodel: " + run + "/model.yaml\n"));

  // --initial-checkpoint (here a run folder: its newest checkpoint) also rebuilds the recorded model.
  const CliResult started = run_tessera(with_data({"train", "--initial-checkpoint", run, "--epochs", "1", "-b", "3",
                                                   "--max-train-batches", "1", "--output", root + "/run2"}));
  INFO(started.err);
  CHECK(started.code == 0);
  CHECK_THAT(started.err, Catch::Contains("initial weights from " + run));
  CHECK(slurp(root + "/run2/model.yaml") == recorded);

  // Weights that record no model file (older checkpoints) still need --model, and say so; with it they work.
  const std::string old = root + "/old.safetensors";
  save_safetensors(old, models::create_model_from_text(recorded, "model.yaml", models::file_values())->state_dict());
  const CliResult no_model = run_tessera(with_data({"validate", "--checkpoint", old}));
  CHECK(no_model.code == 2);
  CHECK_THAT(no_model.err, Catch::Contains(old + " records no model file") && Catch::Contains("--model"));
  write_text(file, recorded);
  CHECK(run_tessera(with_data({"validate", "--checkpoint", old, "--model", file})).code == 0);
  const CliResult resume_old = run_tessera(with_data({"train", "--resume", old, "--epochs", "1"}));
  CHECK(resume_old.code == 2);
  CHECK_THAT(resume_old.err, Catch::Contains("records no model file"));
  std::filesystem::remove_all(root);
}

TEST_CASE("tessera models --print, inspect and export take model files, and bad files are named with their line",
          "[cli][model_file]") {
  TempFiles tmp;
  // A named variant's file, printed, builds the variant.
  const CliResult printed = run_tessera({"models", "--print", "xcit_nano_12_p16_224"});
  REQUIRE(printed.code == 0);
  CHECK(printed.out == models::model_file_text("xcit_nano_12_p16_224"));
  CHECK(run_tessera({"models", "--print", "xcit_nano"}).code == 2);
  // The token mixers a block's attn: can name (this program registers none of its own).
  CHECK(run_tessera({"models", "--mixers"}).out == "attention\ntalking_heads\nxca\nfactor_attention\nufo\n");

  // inspect keeps the file's classes (5, not the 1000 of a name's default), and --num-classes changes them.
  const std::string file = tmp("cait_xca.yaml");
  write_text(file, testing::kCaitXca);
  const auto params = [](int64_t classes) {
    models::ModelOptions o = models::file_values();
    o.num_classes = classes;
    return std::to_string(models::create_model_from_text(testing::kCaitXca, "cait_xca", o)->num_parameters());
  };
  const CliResult inspected = run_tessera({"inspect", "--model", file, "--json"});
  INFO(inspected.err);
  REQUIRE(inspected.code == 0);
  CHECK(json_fields(inspected.out).at("params") == params(0));
  CHECK(json_fields(inspected.out).at("img_size") == "32");
  CHECK(json_fields(run_tessera({"inspect", "--model", file, "--num-classes", "7", "--json"}).out).at("params") ==
        params(7));
  const CliResult summary = run_tessera({"inspect", "--model", file, "--summary"});
  CHECK(summary.code == 0);
  CHECK_THAT(summary.out, Catch::Contains("2 (XCABlock)") && Catch::Contains("blocks_token_only (ModuleList)"));
#ifdef TESSERA_ONNX
  const std::string onnx = tmp("cait_xca.onnx");
  const CliResult exported = run_tessera({"export", "--model", file, "--output", onnx});
  INFO(exported.err);
  CHECK(exported.code == 0);
  CHECK(std::filesystem::file_size(onnx) > 0);
#endif

  // A missing file and a file with an error: exit code 1, the file (and line) named.
  const std::string missing = unique_name("missing.yaml");
  const CliResult no_file = run_tessera({"inspect", "--model", missing});
  CHECK(no_file.code == 1);
  CHECK_THAT(no_file.err, Catch::Contains(missing));
  std::string text = testing::kCaitXca;
  text.replace(text.find("patch_size: 8"), 13, "patch_size: eight");
  const std::string bad = tmp("bad.yaml");
  write_text(bad, text);
  for (const cli::Argv& args : {cli::Argv{"inspect", "--model", bad}, cli::Argv{"bench", "--model", bad},
                                cli::Argv{"train", "--model", bad, "--dataset", "folder", "--data-dir", "."}}) {
    const CliResult r = run_tessera(args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains(bad + ":9:") && Catch::Contains("patch_size"));
  }

  // explain draws a hybrid too (tests/test_explain.cpp checks its page).
  const std::string img = write_picture(tmp, "in.png", 32, 3), page = tmp("explain.html");
  const CliResult explained = run_tessera({"explain", "--model", file, "--image", img, "--output", page});
  CHECK(explained.code == 0);
  CHECK_THAT(slurp(page), Catch::Contains("block-blocks.2") && Catch::Contains("block-blocks_token_only.1"));
}
