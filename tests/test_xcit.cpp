// XCiT: parameter counts equal timm's for every variant, timm's state_dict names, forward and
// backward on small inputs, and the patch-4 option for small images.
#include <map>

#include "gradcheck.h"
#include "tessera/models/registry.h"
#include "tessera/nn/init.h"
#include "tessera/models/xcit.h"

using namespace tessera;
using namespace tessera::models;

TEST_CASE("XCiT parameter counts equal timm's", "[models][xcit]") {
  // Spec §1.4 (sum of p.numel() over timm's model.parameters(), 1000 classes).
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"xcit_nano_12_p16_224", 3053224},    {"xcit_nano_12_p8_224", 3049016},     {"xcit_tiny_12_p16_224", 6716272},
      {"xcit_tiny_12_p8_384", 6706504},     {"xcit_tiny_24_p16_224", 12116896},   {"xcit_tiny_24_p8_224", 12107128},
      {"xcit_small_12_p16_224", 26253304},  {"xcit_small_12_p8_224", 26213032},   {"xcit_small_24_p16_384", 47671384},
      {"xcit_small_24_p8_224", 47631112},   {"xcit_medium_24_p16_224", 84395752}, {"xcit_medium_24_p8_224", 84323624},
      {"xcit_large_24_p16_224", 189096136}, {"xcit_large_24_p8_384", 188932648},
  };
  nn::init::SkipInitGuard counted_not_drawn;  // up to 189M parameters: drawing them is the test's whole time
  for (const auto& [name, count] : expected) {
    INFO(name);
    CHECK(create_model(name)->num_parameters() == count);
  }
}

TEST_CASE("XCiT state_dict keys are timm's", "[models][xcit]") {
  auto m = create_model("xcit_nano_12_p16_224");
  nn::NamedTensors sd = m->state_dict();
  CHECK(sd.size() == 391);  // len(timm.create_model('xcit_nano_12_p16_224').state_dict())
  CHECK(sd[0].first == "cls_token");
  CHECK(sd[1].first == "patch_embed.proj.0.0.weight");
  CHECK(sd[1].second.shape() == Shape{16, 3, 3, 3});
  std::map<std::string, Shape> shapes;
  for (const auto& [k, t] : sd) shapes[k] = t.shape();
  CHECK(shapes.at("patch_embed.proj.6.1.num_batches_tracked") == Shape{});
  CHECK(shapes.at("pos_embed.token_projection.weight") == Shape{128, 64, 1, 1});
  CHECK(shapes.at("blocks.11.attn.temperature") == Shape{4, 1, 1});
  CHECK(shapes.at("blocks.0.local_mp.conv1.weight") == Shape{128, 1, 3, 3});
  CHECK(shapes.at("cls_attn_blocks.1.attn.v.weight") == Shape{128, 128});
  CHECK(shapes.at("head.weight") == Shape{1000, 128});
  // The block's own parameters (gamma1, gamma3, gamma2) come before its children, as in PyTorch.
  auto it = std::find_if(sd.begin(), sd.end(), [](const auto& e) { return e.first.rfind("blocks.0.", 0) == 0; });
  CHECK(it->first == "blocks.0.gamma1");
  CHECK((it + 1)->first == "blocks.0.gamma3");
  CHECK((it + 2)->first == "blocks.0.gamma2");
  CHECK(create_model("xcit_nano_12_p8_224")->state_dict().size() == 385);
  CHECK(create_model("xcit_tiny_24_p16_224")->state_dict().size() == 715);
}

TEST_CASE("XCiT runs forward and backward at any multiple of the patch size", "[models][xcit]") {
  ModelOptions o;
  o.num_classes = 10;
  auto m = create_model("xcit_nano_12_p16_224", o);
  Tensor x = randn({2, 3, 48, 32});  // a 3x2 token grid
  Tensor logits = m->forward(x);
  CHECK(logits.shape() == Shape{2, 10});
  logits.sum().backward();
  for (const auto& [name, p] : m->named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
  }
  CHECK(amax(abs(std::static_pointer_cast<Xcit>(m)->cls_token.grad())).item() > 0);
  CHECK_THROWS_WITH(m->forward(randn({1, 3, 40, 32})), Catch::Contains("multiple of the patch size"));
  CHECK_THROWS_WITH(m->forward(randn({1, 1, 32, 32})), Catch::Contains("Xcit"));
}

TEST_CASE("XCiT with patch 4 takes 28x28 images", "[models][xcit]") {
  ModelOptions o;
  o.num_classes = 10;
  o.patch_size = 4;
  o.img_size = 28;
  auto m = create_model("xcit_nano_12_p16_224", o);
  Tensor logits = m->forward(randn({2, 3, 28, 28}));
  CHECK(logits.shape() == Shape{2, 10});
  m->eval();
  Tensor a = m->forward(randn({1, 3, 28, 28}));
  CHECK(std::isfinite(a.sum().item()));
}

TEST_CASE("unknown model names are clear errors", "[models]") {
  CHECK_THROWS_WITH(create_model("xcit_huge_12_p16_224"),
                    Catch::Contains("unknown model") && Catch::Contains("xcit_nano_12_p16_224"));
  CHECK(model_names().size() >= 28);
}

// Layers, not ops: each composes ops the op table checks one by one (tests/op_samples/).
TEST_CASE("XCA, LPI and XCiT's class-attention block pass gradcheck", "[models][xcit]") {
  nn::XCA xca(8, 2);
  xca.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return xca.forward(in[0]); },
              {testing::leaf({2, 6, 8}), xca.temperature, xca.qkv->weight});

  nn::LPI lpi(4);
  lpi.to(DType::Float64);
  lpi.eval();  // BatchNorm on running statistics: the function is deterministic in eval
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return lpi.forward(in[0].transpose(1, 2), 2, 3); },
              {testing::leaf({2, 4, 6}), lpi.conv1->weight, lpi.conv2->bias});

  XcitClassAttentionBlock ca(8, 2, 2.0, 0.5, 0.0, /*tokens_norm=*/false);
  ca.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return ca.forward(in[0]); },
              {testing::leaf({2, 5, 8}), ca.gamma1, ca.attn->q->weight});
}

TEST_CASE("XCA attends over channels: its cost does not grow quadratically with tokens", "[models][xcit]") {
  nn::XCA xca(8, 2);
  // The attention map is [B, h, dh, dh] whatever N is: output for N tokens equals the output for
  // the same tokens inside a longer sequence only through shared statistics, so check the shape
  // contract and that permuting tokens permutes the output (no positional mixing in XCA).
  Tensor x = randn({1, 7, 8});
  Tensor perm = from_vector(std::vector<int64_t>{3, 0, 6, 1, 5, 2, 4}, {7});
  Tensor a = index_select(xca.forward(x), 1, perm);
  Tensor b = xca.forward(index_select(x, 1, perm));
  CHECK(testing::max_abs_diff(a, b) < 1e-5);
}
