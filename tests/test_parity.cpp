// Parity with timm: golden files written by tools/gen_goldens.py (timm + PyTorch, random seeded
// weights) hold the weights, an input, the eval- and train-mode logits and gradients of
// sum(logits · probe). Our model loads the same weights and must reproduce them: logits within
// 1e-4 of the logits' scale, gradients within 1e-3 of theirs.
#include "gradcheck.h"
#include "models/cait.h"
#include "models/coat.h"
#include "models/xcit.h"
#include "nn/safetensors.h"

using namespace tessera;
using namespace tessera::models;

namespace {

std::string golden_path(const std::string& file) { return std::string(TESSERA_TEST_DATA_DIR) + "/../goldens/" + file; }

// max |a - b| / max |b|: the error relative to the reference's scale.
double relative_error(const Tensor& a, const Tensor& b) {
  double scale = amax(abs(b.to(DType::Float64))).item();
  return testing::max_abs_diff(a, b) / (scale > 0 ? scale : 1.0);
}

void check_against_golden(Model& model, const std::string& name) {
  model.load_state_dict(load_safetensors(golden_path(name + ".weights.safetensors")));
  SafetensorsReader golden = open_safetensors(golden_path(name + ".golden.safetensors"));
  Tensor x = golden.load("input");

  model.eval();
  {
    NoGradGuard no_grad;
    CHECK(relative_error(model.forward(x), golden.load("logits_eval")) < 1e-4);
  }

  model.train();
  Tensor xg = x.clone().set_requires_grad();
  Tensor logits = model.forward(xg);
  CHECK(relative_error(logits, golden.load("logits_train")) < 1e-4);
  (logits * golden.load("probe")).sum().backward();
  CHECK(relative_error(xg.grad(), golden.load("grad.input")) < 1e-3);
  for (const auto& [param, tensor] : model.named_parameters()) {
    const std::string key = "grad." + param;
    if (!golden.contains(key)) continue;
    INFO(key);
    CHECK(relative_error(tensor.grad(), golden.load(key)) < 1e-3);
  }
}

}  // namespace

TEST_CASE("reduced XCiT matches timm (eval and train logits, input and parameter gradients)", "[parity][xcit]") {
  XcitConfig c;
  c.img_size = 32;
  c.patch_size = 16;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.eta = 0.5;
  c.tokens_norm = true;
  c.num_classes = 10;
  Xcit model(c);
  check_against_golden(model, "xcit_reduced");
}

TEST_CASE("reduced CaiT matches timm (eval and train logits, input and parameter gradients)", "[parity][cait]") {
  CaitConfig c;
  c.img_size = 32;
  c.patch_size = 16;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.init_values = 0.5;
  c.num_classes = 10;
  Cait model(c);
  check_against_golden(model, "cait_reduced");
}

TEST_CASE("reduced CoaT-Lite and CoaT match timm, loading timm's alias keys", "[parity][coat]") {
  for (int64_t parallel : {0, 1}) {
    INFO("parallel_depth " << parallel);
    CoatConfig c;
    c.img_size = 32;
    c.embed_dims = {16, 16, 16, 16};
    c.serial_depths = {1, 1, 1, 1};
    c.parallel_depth = parallel;
    c.num_heads = 8;
    c.mlp_ratios = {2, 2, 2, 2};
    c.num_classes = 10;
    Coat model(c);
    check_against_golden(model, parallel ? "coat_reduced" : "coat_lite_reduced");
  }
}
