// ONNX export (io/onnx_export.h): one small model per family exported with a dynamic batch at two
// resolutions, each file accepted by ONNX's checker (export_onnx runs it) and run by ONNX Runtime at
// two batch sizes, its logits within 1e-4 of Tessera's; a static-batch export; what the exporter
// refuses.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gradcheck.h"
#include "tessera/io/npy.h"
#include "tessera/io/onnx_export.h"
#include "tessera/models/ufo_vit.h"
#include "tests/device_check.h"
#include "tests/reduced_models.h"
#include "tests/temp_dir.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr double kTolerance = 1e-4;

// ONNX Runtime's logits for `images` against Tessera's, through tests/onnx_runtime_check.py.
int onnx_runtime_agrees(const std::string& onnx, const Tensor& images, const Tensor& logits, const TempDir& dir) {
  const std::string ort = TESSERA_ONNXRUNTIME_DIR;
  INFO("ONNX Runtime is expected in " << ort << " (scripts/test.sh installs it: /usr/bin/python3 -m pip install "
                                      << "--target " << ort << " onnxruntime)");
  REQUIRE(std::filesystem::exists(ort + "/onnxruntime"));
  const std::string in = (dir.dir / "input.npy").string(), want = (dir.dir / "logits.npy").string();
  io::write_npy(in, images.contiguous());
  io::write_npy(want, logits.contiguous());
  const std::string cmd = "PYTHONPATH='" + ort + "' /usr/bin/python3 '" + std::string(TESSERA_SOURCE_DIR) +
                          "/tests/onnx_runtime_check.py' '" + onnx + "' '" + in + "' '" + want + "' " +
                          std::to_string(kTolerance);
  return std::system(cmd.c_str());
}

models::UfoVitConfig ufo_config(int64_t img) {
  models::UfoVitConfig c;
  c.img_size = img;
  c.embed_dim = 32;
  c.attn_dim = 16;
  c.num_heads = 4;
  c.depth = 2;
  c.num_classes = 5;
  c.layer_scale_init = 0.5;
  return c;
}

std::shared_ptr<models::Model> family_model(const std::string& family, int64_t img) {
  if (family == "xcit") {
    models::XcitConfig c = xcit_reduced()->config;
    c.img_size = img;
    return std::make_shared<models::Xcit>(c);
  }
  if (family == "ufo_vit") return std::make_shared<models::UfoVit>(ufo_config(img));
  if (family == "cait") {
    models::CaitConfig c = cait_reduced()->config;
    c.img_size = img;
    return std::make_shared<models::Cait>(c);
  }
  models::CoatConfig c = coat_reduced(family == "coat" ? 1 : 0)->config;
  c.img_size = img;
  return std::make_shared<models::Coat>(c);
}

}  // namespace

TEST_CASE("every family exports to ONNX that ONNX Runtime runs to Tessera's logits", "[onnx]") {
  for (const std::string family : {"xcit", "cait", "coat_lite", "coat", "ufo_vit"})
    for (const int64_t img : {32, 64}) {
      INFO(family << " at " << img << "x" << img);
      const auto model = family_model(family, img);
      TempDir dir;
      const std::string onnx = (dir.dir / "model.onnx").string();
      export_onnx(*model, onnx, {3, img, true});
      model->eval();
      NoGradGuard no_grad;
      for (const int64_t batch : {1, 3}) {
        INFO("batch " << batch);
        const Tensor images = randu({batch, 3, img, img}, -2, 2, static_cast<uint64_t>(batch + img));
        CHECK(onnx_runtime_agrees(onnx, images, model->forward(images), dir) == 0);
      }
    }
}

TEST_CASE("a static export has batch 1 and leaves the model as it was", "[onnx]") {
  const auto model = family_model("xcit", 32);
  model->train(true);
  TempDir dir;
  const std::string onnx = (dir.dir / "static.onnx").string();
  export_onnx(*model, onnx, {3, 32, false});
  CHECK(model->is_training());
  model->eval();
  NoGradGuard no_grad;
  const Tensor images = randu({1, 3, 32, 32}, -2, 2, 5);
  CHECK(onnx_runtime_agrees(onnx, images, model->forward(images), dir) == 0);
  // The parameters are initializers under timm's names.
  std::ifstream f(onnx, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("blocks.0.attn.qkv.weight") != std::string::npos);
  CHECK(bytes.find("cls_token") != std::string::npos);
}

TEST_CASE("a failed export leaves an existing file as it was", "[onnx][errors]") {
  const auto model = family_model("xcit", 32);
  TempDir dir;
  const std::string onnx = (dir.dir / "kept.onnx").string();
  { std::ofstream(onnx) << "old"; }
  // A resolution the patch grid cannot take fails in the trace; the old file stays.
  CHECK_THROWS(export_onnx(*model, onnx, {3, 33, false}));
  std::ifstream f(onnx);
  std::string content;
  f >> content;
  CHECK(content == "old");
}
