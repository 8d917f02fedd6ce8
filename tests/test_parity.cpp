// Parity with timm: golden files written by tools/gen_goldens.py (timm + PyTorch) hold an input's
// eval- and train-mode logits and the gradients of sum(logits · probe). Our model, given the same
// weights and input, must reproduce them: logits within 1e-4 of the logits' scale, gradients
// within 1e-3 of theirs.
//   - Reduced configs: random seeded weights and the input are stored in the files.
//   - timm's real named variants at small inputs: weights and input come from the parity formula
//     (parity_weights.h) on both sides; the golden's checksums prove ours are timm's bit for bit.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "gradcheck.h"
#include "tessera/models/registry.h"
#include "tessera/io/safetensors.h"
#include "parity_weights.h"
#include "reduced_models.h"

using namespace tessera;
using namespace tessera::models;

namespace {

std::string golden_path(const std::string& file) { return std::string(TESSERA_TEST_DATA_DIR) + "/../goldens/" + file; }

// max |a - b| / max |b|: the error relative to the reference's scale.
double relative_error(const Tensor& a, const Tensor& b) {
  double scale = amax(abs(b.to(DType::Float64))).item();
  return testing::max_abs_diff(a, b) / (scale > 0 ? scale : 1.0);
}

// Runs `model` (weights in place) on `x` as the golden did: eval logits, then train logits and
// the gradients of sum(logits · probe) w.r.t. the input and every parameter the golden has.
void check_outputs(Model& model, const SafetensorsReader& golden, const Tensor& x) {
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
  int64_t checked = 0;
  for (const auto& [param, tensor] : model.named_parameters()) {
    const std::string key = "grad." + param;
    if (!golden.contains(key)) continue;
    INFO(key);
    CHECK(relative_error(tensor.grad(), golden.load(key)) < 1e-3);
    ++checked;
  }
  // Every stored parameter gradient has a parameter of that name here.
  CHECK(checked == std::count_if(golden.names().begin(), golden.names().end(),
                                 [](const std::string& k) { return k.rfind("grad.", 0) == 0 && k != "grad.input"; }));
}

// A reduced config: weights and input from the files.
void check_against_golden(Model& model, const std::string& name) {
  model.load_state_dict(load_safetensors(golden_path(name + ".weights.safetensors")));
  SafetensorsReader golden = open_safetensors(golden_path(name + ".golden.safetensors"));
  check_outputs(model, golden, golden.load("input"));
}

// The golden's proof that both sides hold the same weights: the filled tensors' names in order
// (metadata "tensors"), the float64 sum of each ("check.sums"; summation order differs, so equal
// to 1e-12 of the sum of magnitudes, far below one float32 ulp of any element), a few tensors in
// full ("check.<name>", bit for bit) and the input's sum.
void check_parity_weights(const Model& model, const SafetensorsReader& golden, const Tensor& x) {
  const nn::NamedTensors targets = testing::parity_targets(model);
  std::ostringstream ours;
  for (size_t i = 0; i < targets.size(); ++i) ours << (i ? "\n" : "") << targets[i].first;
  REQUIRE(golden.metadata().count("tensors"));
  REQUIRE(ours.str() == golden.metadata().at("tensors"));

  const std::vector<double> sums = golden.load("check.sums").to_vector<double>();
  REQUIRE(sums.size() == targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::vector<double> v = targets[i].second.to_vector<double>();
    double sum = 0, magnitude = 0;
    for (double e : v) sum += e, magnitude += std::abs(e);
    INFO(targets[i].first << ": sum " << sum << " vs timm's " << sums[i]);
    CHECK(std::abs(sum - sums[i]) <= 1e-12 * magnitude);
  }
  for (const auto& [name, tensor] : targets) {
    if (!golden.contains("check." + name)) continue;
    INFO(name);
    CHECK(testing::max_abs_diff(tensor, golden.load("check." + name)) == 0);
  }
  const std::vector<double> pixels = x.to_vector<double>();
  CHECK(std::accumulate(pixels.begin(), pixels.end(), 0.0) == Approx(golden.load("check.input").item()).epsilon(1e-12));
}

// A named timm variant: weights and input from the parity formula.
void check_named_variant(const std::string& name, int64_t img_size) {
  std::shared_ptr<Model> model = create_model(name, {.num_classes = 10, .img_size = img_size});
  testing::fill_parity_weights(*model);
  SafetensorsReader golden =
      open_safetensors(golden_path(name + "_" + std::to_string(img_size) + ".golden.safetensors"));
  const int64_t batch = golden.info("probe").shape[0];
  Tensor x = testing::parity_tensor("input", {batch, 3, img_size, img_size});
  check_parity_weights(*model, golden, x);
  check_outputs(*model, golden, x);
}

}  // namespace

TEST_CASE("reduced XCiT matches timm (eval and train logits, input and parameter gradients)", "[parity][xcit]") {
  check_against_golden(*testing::xcit_reduced(), "xcit_reduced");
}

TEST_CASE("reduced CaiT matches timm (eval and train logits, input and parameter gradients)", "[parity][cait]") {
  check_against_golden(*testing::cait_reduced(), "cait_reduced");
}

TEST_CASE("reduced CoaT-Lite and CoaT match timm, loading timm's alias keys", "[parity][coat]") {
  for (int64_t parallel : {0, 1}) {
    INFO("parallel_depth " << parallel);
    check_against_golden(*testing::coat_reduced(parallel), parallel ? "coat_reduced" : "coat_lite_reduced");
  }
}

TEST_CASE("parity weight formula: hash, unit values and roles", "[parity]") {
  // FNV-1a test vectors (draft-eastlake-fnv): "" -> 0x811c9dc5, "a" -> 0xe40c292c.
  CHECK(testing::fnv1a32("") == 0x811C9DC5u);
  CHECK(testing::fnv1a32("a") == 0xE40C292Cu);
  // u * 2^24 + 2^23 for "a", elements 0..2, from the generator:
  //   [int((u + 0.5) * 2**24) for u in gen_goldens.parity_unit("a", 3)] == [1736881, 8129242, 13685054]
  const uint32_t h = testing::fnv1a32("a");
  CHECK(testing::parity_unit(h, 0) == 1736881 / 16777216.0 - 0.5);
  CHECK(testing::parity_unit(h, 1) == 8129242 / 16777216.0 - 0.5);
  CHECK(testing::parity_unit(h, 2) == 13685054 / 16777216.0 - 0.5);
  // Roles by name and rank.
  auto u = [](const std::string& name, uint64_t i) { return testing::parity_unit(testing::fnv1a32(name), i); };
  CHECK(testing::parity_tensor("norm.weight", {3}).to_vector<float>()[2] ==
        static_cast<float>(1 + u("norm.weight", 2) / 4));
  CHECK(testing::parity_tensor("fc.weight", {2, 9}).to_vector<float>()[5] ==
        static_cast<float>(u("fc.weight", 5) * 4 / 3));
  CHECK(testing::parity_tensor("bn.running_var", {3}).to_vector<float>()[1] ==
        static_cast<float>(1 + u("bn.running_var", 1) / 2));
  CHECK(testing::parity_tensor("fc.bias", {3}).to_vector<float>()[0] == static_cast<float>(u("fc.bias", 0) / 4));
  CHECK(testing::parity_tensor("bn.num_batches_tracked", {}, DType::Int64).to_vector<int64_t>()[0] == 0);
}

TEST_CASE("XCiT-N12/16 (timm's xcit_nano_12_p16_224) at 64x64 matches timm", "[parity][xcit]") {
  check_named_variant("xcit_nano_12_p16_224", 64);
}

TEST_CASE("XCiT-N12/8 (timm's xcit_nano_12_p8_224) at 32x32 matches timm", "[parity][xcit]") {
  check_named_variant("xcit_nano_12_p8_224", 32);
}

TEST_CASE("CaiT-XXS24 (timm's cait_xxs24_224) at 64x64 matches timm", "[parity][cait]") {
  check_named_variant("cait_xxs24_224", 64);
}

TEST_CASE("CoaT-Lite Tiny (timm's coat_lite_tiny) at 64x64 matches timm", "[parity][coat]") {
  check_named_variant("coat_lite_tiny", 64);
}

TEST_CASE("CoaT Tiny (timm's coat_tiny) at 64x64 matches timm with its parallel blocks", "[parity][coat]") {
  check_named_variant("coat_tiny", 64);
}
