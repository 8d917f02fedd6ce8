// PyTorch checkpoints read without Python (io/torch_checkpoint.h): files torch.save wrote
// (tools/make_torch_checkpoints.py) in every container shape load to the very bits of the same
// weights in safetensors, official names map to timm's with the same logits, and hostile files are
// refused with a message that names what was wrong, nothing executed.
#include <catch2/catch.hpp>

#include <cstring>

#include "gradcheck.h"
#include "reduced_models.h"
#include "tessera/io/safetensors.h"
#include "tessera/io/weights_file.h"
#include "tessera/ops/ops.h"

using namespace tessera;

namespace {

std::string fixture(const std::string& name) { return std::string(TESSERA_TEST_DATA_DIR) + "/torch/" + name; }
std::string golden(const std::string& name) {
  return std::string(TESSERA_TEST_DATA_DIR) + "/../goldens/" + name + ".weights.safetensors";
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), static_cast<size_t>(ac.numel()) * ac.element_size()) == 0;
}

// `got` holds exactly `want`'s names, in any order, each tensor bit for bit.
void check_same_state(const nn::NamedTensors& got, const nn::NamedTensors& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, w] : want) {
    INFO(name);
    const auto it = std::find_if(got.begin(), got.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE(it != got.end());
    CHECK(same_bits(it->second, w));
  }
}

}  // namespace

TEST_CASE("torch.save archives load to the bits of the same weights in safetensors, in every container shape",
          "[io][torch]") {
  // {"model": ..., plain values}: the values beside the state dict are read and left.
  check_same_state(load_weights_file(fixture("cait_model.pth")), load_safetensors(golden("cait_reduced")));
  // {"state_dict": ...} under "module.", with a transposed view and a view at a storage offset.
  check_same_state(load_weights_file(fixture("coat_lite_state_dict.pth")),
                   load_safetensors(golden("coat_lite_reduced")));
  // {"model": zeros, "model_ema": ...}: the model's weights by default, the EMA on request.
  const nn::NamedTensors model = load_weights_file(fixture("coat_ema.pth"));
  for (const auto& [name, t] : model) CHECK(amax(abs(t.to(DType::Float64))).item() == 0);
  check_same_state(load_weights_file(fixture("coat_ema.pth"), {.use_ema = true}),
                   load_safetensors(golden("coat_reduced")));
  // Every dtype, an empty and a 0-d tensor, two views of one storage; stored, deflated and zip64.
  for (const char* file : {"dtypes.pth", "deflated.pth", "zip64.pth"}) {
    INFO(file);
    check_same_state(load_weights_file(fixture(file)), load_safetensors(fixture("dtypes.safetensors")));
  }
}

TEST_CASE("an official XCiT checkpoint maps to timm's names and gives the logits of timm's weights", "[io][torch]") {
  auto official = testing::xcit_reduced(), reference = testing::xcit_reduced();
  const nn::NamedTensors raw = load_weights_file(fixture("xcit_official.pth"));
  bool has_official_names = false;
  for (const auto& [name, t] : raw) has_official_names |= name.find("pos_embeder.") == 0;
  CHECK(has_official_names);
  CHECK(official->load_weights(raw, /*strict=*/true).ok());
  reference->load_state_dict(load_safetensors(golden("xcit_reduced")));
  check_same_state(official->state_dict(), reference->state_dict());
  official->eval();
  reference->eval();
  NoGradGuard no_grad;
  const Tensor x = randn({2, 3, 32, 32});
  CHECK(same_bits(official->forward(x), reference->forward(x)));
}

TEST_CASE("hostile and broken checkpoints are refused with a message, nothing executed", "[io][torch]") {
  const auto refused = [](const std::string& file, const std::string& said) {
    INFO(file);
    CHECK_THROWS_WITH(load_weights_file(fixture(file)), Catch::Contains(said));
  };
  refused("hostile/os_system.pth", "refusing the global 'os.system'");
  refused("hostile/builtins_eval.pth", "refusing the global 'builtins.eval'");
  refused("hostile/subprocess.pth", "refusing the global 'subprocess.Popen'");
  refused("hostile/reduce_storage.pth", "refusing to call 'torch.FloatStorage'");
  refused("hostile/oversized_storage.pth", "claims 1048576 elements of 4 bytes but holds 16 bytes");
  refused("hostile/recursive.pth", "contains itself");
  refused("hostile/deep.pth", "nested more than 32 deep");
  refused("hostile/shared_lists.pth", "holds a tuple");  // walked once per value, not once per path
  refused("hostile/truncated.pth", "no end of central directory record");
  refused("hostile/zip_bomb.pth", "more than deflate can produce");
  refused("legacy.pth", "legacy format (before PyTorch 1.6)");
  CHECK_THROWS_WITH(load_weights_file(fixture("no_such.pth")), Catch::Contains("cannot open"));
}
