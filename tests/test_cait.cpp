// CaiT: parameter counts equal timm's, timm's state_dict names, forward/backward, and the
// talking-heads attention's gradients.
#include <map>

#include "gradcheck.h"
#include "tessera/models/cait.h"
#include "tessera/models/pos_embed.h"
#include "tessera/models/registry.h"
#include "tessera/nn/init.h"

using namespace tessera;
using namespace tessera::models;

TEST_CASE("CaiT parameter counts equal timm's", "[models][cait]") {
  // Spec §2.3 (timm builds the _384 / _448 names at their resolution).
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"cait_xxs24_224", 11956264}, {"cait_xxs24_384", 12029224}, {"cait_xxs36_224", 17299720},
      {"cait_xxs36_384", 17372680}, {"cait_xs24_384", 26670088},  {"cait_s24_224", 46916200},
      {"cait_s24_384", 47062120},   {"cait_s36_384", 68366632},   {"cait_m36_384", 271221352},
      {"cait_m48_448", 356460520}};
  nn::init::SkipInitGuard counted_not_drawn;  // up to 356M parameters: drawing them is the test's whole time
  for (const auto& [name, count] : expected) {
    INFO(name);
    CHECK(create_model(name)->num_parameters() == count);
  }
}

TEST_CASE("CaiT state_dict keys are timm's", "[models][cait]") {
  auto m = create_model("cait_xxs24_224");
  nn::NamedTensors sd = m->state_dict();
  CHECK(sd.size() == 476);  // len(timm.create_model('cait_xxs24_224').state_dict())
  std::map<std::string, Shape> shapes;
  for (const auto& [k, t] : sd) shapes[k] = t.shape();
  CHECK(sd[0].first == "cls_token");
  CHECK(sd[1].first == "pos_embed");
  CHECK(shapes.at("pos_embed") == Shape{1, 196, 192});
  CHECK(shapes.at("patch_embed.proj.weight") == Shape{192, 3, 16, 16});
  CHECK(shapes.at("blocks.23.attn.proj_l.weight") == Shape{4, 4});
  CHECK(shapes.at("blocks.0.gamma_1") == Shape{192});
  CHECK(shapes.at("blocks_token_only.1.attn.k.bias") == Shape{192});
  CHECK(shapes.at("head.bias") == Shape{1000});
}

TEST_CASE("CaiT runs forward and backward; the input size is fixed", "[models][cait]") {
  CaitConfig c;
  c.img_size = 32;
  c.patch_size = 16;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.num_classes = 5;
  Cait m(c);
  Tensor logits = m.forward(randn({2, 3, 32, 32}));
  CHECK(logits.shape() == Shape{2, 5});
  logits.sum().backward();
  for (const auto& [name, p] : m.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  CHECK_THROWS_WITH(m.forward(randn({1, 3, 48, 48})), Catch::Contains("Cait") && Catch::Contains("img_size"));
}

TEST_CASE("CaiT loads weights trained at another resolution by resizing pos_embed", "[models][cait]") {
  CaitConfig c;
  c.img_size = 32;  // 2x2 grid
  c.patch_size = 16;
  c.embed_dim = 16;
  c.depth = 1;
  c.num_heads = 2;
  c.num_classes = 3;
  Cait a(c);
  c.img_size = 64;  // 4x4 grid
  Cait b(c);
  CHECK_THROWS_WITH(b.load_state_dict(a.state_dict()), Catch::Contains("pos_embed") && Catch::Contains("[1, 4, 16]"));
  CHECK(b.load_weights(a.state_dict()).ok());
  CHECK(testing::max_abs_diff(b.pos_embed, resize_pos_embed(a.pos_embed, {2, 2}, {4, 4})) < 1e-7);
  CHECK(testing::max_abs_diff(b.cls_token, a.cls_token) == 0);
  CHECK(b.forward(randn({1, 3, 64, 64})).shape() == Shape{1, 3});
  // A table of another width cannot be resampled: it stays a reported mismatch.
  c.embed_dim = 8;
  Cait narrow(c);
  CHECK_THROWS_WITH(b.load_weights(narrow.state_dict()), Catch::Contains("pos_embed"));
}

// Layers, not ops: each composes ops the op table checks one by one (tests/op_samples/).
TEST_CASE("talking-heads attention passes gradcheck", "[models][cait]") {
  nn::TalkingHeadAttention attn(8, 2);
  attn.to(DType::Float64);
  Tensor x = testing::leaf({2, 5, 8});
  // Input, a head-mixing weight (before the softmax) and the qkv bias (through q, k and v).
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return attn.forward(in[0]); },
              {x, attn.proj_l->weight, attn.proj_w->bias, attn.qkv->bias});
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return attn.forward(in[0].transpose(0, 1)); },
              {testing::leaf({5, 2, 8})});
}
