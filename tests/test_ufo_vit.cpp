// UFO-ViT (docs/ufo_vit.md): parameter counts equal the closed form of docs/ufo_vit.md for every variant, the
// project's state_dict names, forward/backward on a reduced config, float64 gradchecks of XNorm
// and both UFO attention layers, the invariants of Eq. 3-8 (unit-norm rows of q̂ and columns of
// KV̂, a dh x dh context whatever N, no positional mixing), and the bicubic pos_embed resize.
#include <cmath>
#include <map>

#include "gradcheck.h"
#include "tessera/models/pos_embed.h"
#include "tessera/models/registry.h"
#include "tessera/nn/init.h"
#include "tessera/models/ufo_vit.h"

using namespace tessera;
using namespace tessera::models;
using nn::ufo_attention;
using nn::ufo_context;
using nn::xnorm;

namespace {

// A small model: 32x32 images, a 2x2 token grid, d 32, E 16, 4 heads (dh 4), 2 blocks.
UfoVitConfig small_config() {
  UfoVitConfig c;
  c.img_size = 32;
  c.embed_dim = 32;
  c.attn_dim = 16;
  c.num_heads = 4;
  c.depth = 2;
  c.num_classes = 5;
  c.layer_scale_init = 0.5;  // non-tiny branches, so every branch shows in the output
  return c;
}

// Eq. 6-8 written out: A[b, h, n, j] = γ_h² · (q_n / ‖q_n‖) · (KV_:j / ‖KV_:j‖), KV = Σ_t k_tᵀ v_t.
std::vector<double> naive_ufo_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gamma) {
  const int64_t B = q.size(0), H = q.size(1), Nq = q.size(2), N = k.size(2), D = q.size(3);
  std::vector<double> Q = q.contiguous().to_vector<double>(), K = k.contiguous().to_vector<double>(),
                      V = v.contiguous().to_vector<double>(), G = gamma.contiguous().to_vector<double>();
  std::vector<double> out(B * H * Nq * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      std::vector<double> kv(D * D, 0.0);
      for (int64_t t = 0; t < N; ++t)
        for (int64_t i = 0; i < D; ++i)
          for (int64_t j = 0; j < D; ++j) kv[i * D + j] += K[(bh * N + t) * D + i] * V[(bh * N + t) * D + j];
      for (int64_t j = 0; j < D; ++j) {
        double s = 0;
        for (int64_t i = 0; i < D; ++i) s += kv[i * D + j] * kv[i * D + j];
        for (int64_t i = 0; i < D; ++i) kv[i * D + j] /= std::sqrt(s);
      }
      for (int64_t n = 0; n < Nq; ++n) {
        const double* qn = &Q[(bh * Nq + n) * D];
        double s = 0;
        for (int64_t i = 0; i < D; ++i) s += qn[i] * qn[i];
        for (int64_t j = 0; j < D; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < D; ++i) dot += qn[i] * kv[i * D + j];
          out[(bh * Nq + n) * D + j] = G[h] * G[h] * dot / std::sqrt(s);
        }
      }
    }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("UFO-ViT parameter counts equal the spec's", "[models][ufo_vit]") {
  // Spec §5.4 (closed form; Table 1 of the paper rounds to 10.0 / 20.7 / 37.3 / 63.7M).
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"ufo_vit_t", 10162344}, {"ufo_vit_s", 20732552}, {"ufo_vit_m", 37367528}, {"ufo_vit_b", 63838200}};
  nn::init::SkipInitGuard counted_not_drawn;  // counted, not drawn
  for (const auto& [name, count] : expected) {
    INFO(name);
    CHECK(create_model(name)->num_parameters() == count);
  }
}

TEST_CASE("UFO-ViT state_dict names and shapes", "[models][ufo_vit]") {
  auto m = create_model("ufo_vit_t");
  nn::NamedTensors sd = m->state_dict();
  std::map<std::string, Shape> shapes;
  for (const auto& [k, t] : sd) shapes[k] = t.shape();
  CHECK(sd[0].first == "cls_token");
  CHECK(sd[1].first == "pos_embed");
  CHECK(shapes.at("pos_embed") == Shape{1, 196, 192});
  CHECK(shapes.at("patch_embed.proj.6.0.weight") == Shape{192, 96, 3, 3});
  CHECK(shapes.at("blocks.23.attn.qkv.weight") == Shape{288, 192});  // d -> 3E
  CHECK(shapes.at("blocks.23.attn.proj.weight") == Shape{192, 96});  // E -> d
  CHECK(shapes.at("blocks.0.attn.gamma") == Shape{4, 1, 1});
  CHECK(shapes.at("blocks.0.local_conv.weight") == Shape{192, 1, 3, 3});
  CHECK(shapes.at("blocks.0.local_conv.bias") == Shape{192});
  CHECK(shapes.at("blocks.0.mlp.fc1.weight") == Shape{768, 192});
  CHECK(shapes.at("cls_attn_blocks.1.gamma_1") == Shape{192});
  CHECK(shapes.at("cls_attn_blocks.1.attn.q.weight") == Shape{96, 192});
  CHECK(shapes.at("cls_attn_blocks.1.attn.gamma") == Shape{4, 1, 1});
  CHECK(shapes.at("cls_attn_blocks.0.mlp.fc2.bias") == Shape{192});
  CHECK(shapes.at("norm.weight") == Shape{192});
  CHECK(shapes.at("head.weight") == Shape{1000, 192});
  auto it = std::find_if(sd.begin(), sd.end(), [](const auto& e) { return e.first.rfind("blocks.0.", 0) == 0; });
  CHECK(it->first == "blocks.0.gamma1");
  CHECK((it + 1)->first == "blocks.0.gamma3");
  CHECK((it + 2)->first == "blocks.0.gamma2");
  // stem 4 x (conv + 5 BN) = 24, cls, pos, 24 blocks x 20, 2 CA blocks x 19, norm 2, head 2.
  CHECK(sd.size() == 24 + 2 + 24 * 20 + 2 * 19 + 2 + 2);
  // LayerScale defaults: 1e-5 for the 24-layer models, 1.0 for S (12 layers); attention γ starts at 1.
  auto s = std::static_pointer_cast<UfoVit>(create_model("ufo_vit_s"));
  CHECK(s->blocks->size() == 12);
  CHECK(s->blocks->operator[](0)->gamma1.to_vector<float>()[0] == 1.0f);
  auto t = std::static_pointer_cast<UfoVit>(m);
  CHECK(t->blocks->operator[](0)->gamma2.to_vector<float>()[0] == 1e-5f);
  CHECK(t->blocks->operator[](0)->attn->gamma.to_vector<float>() == std::vector<float>(4, 1.0f));
}

TEST_CASE("UFO-ViT runs forward and backward; every parameter gets a gradient", "[models][ufo_vit]") {
  UfoVit m(small_config());
  Tensor logits = m.forward(randn({2, 3, 32, 32}));
  CHECK(logits.shape() == Shape{2, 5});
  logits.sum().backward();
  for (const auto& [name, p] : m.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(amax(abs(p.grad())).item() > 0);
  }
  m.eval();
  Tensor x = randn({1, 3, 32, 32});
  CHECK(testing::max_abs_diff(m.forward(x), m.forward(x)) == 0);  // eval is deterministic (BN running stats)
}

TEST_CASE("UFO-ViT patch options: 8, and 4 for 28x28 / 32x32 images", "[models][ufo_vit]") {
  ModelOptions o;
  o.num_classes = 10;
  o.patch_size = 4;
  o.img_size = 28;
  auto m = std::static_pointer_cast<UfoVit>(create_model("ufo_vit_t", o));
  CHECK(m->pos_embed.shape() == Shape{1, 49, 192});
  CHECK(m->patch_embed->proj->size() == 3);  // conv, GELU, conv
  CHECK(m->forward(randn({2, 3, 28, 28})).shape() == Shape{2, 10});
  UfoVitConfig c = small_config();  // the same options on a small model: patch 4 at 32x32, patch 8
  c.patch_size = 4;
  CHECK(UfoVit(c).pos_embed.shape() == Shape{1, 64, 32});
  c.patch_size = 8;
  UfoVit p8(c);
  CHECK(p8.pos_embed.shape() == Shape{1, 16, 32});
  CHECK(p8.forward(randn({1, 3, 32, 32})).shape() == Shape{1, 5});
  CHECK(p8.patch_embed->proj->size() == 5);
}

TEST_CASE("xnorm is Eq. 4: unit rows (filter axis) and unit columns (space axis) times gamma", "[models][ufo_vit]") {
  Tensor x = randn({2, 3, 5, 4});
  // q̂: every row (over the last, channel axis) has norm 1 with γ = 1, and |γ_h| with γ = [h, 1, 1].
  Tensor qhat = xnorm(x, ones({3, 1, 1}), -1);
  CHECK(testing::max_abs_diff(norm(qhat, {-1}), ones({2, 3, 5})) < 1e-5);
  Tensor g = from_vector(std::vector<float>{0.5f, -2.0f, 3.0f}, {3, 1, 1});
  Tensor col_norms = norm(xnorm(x, g, -2), {-2});  // [2, 3, 4]
  CHECK(testing::max_abs_diff(col_norms, abs(g).reshape({1, 3, 1}).expand({2, 3, 4})) < 1e-5);
  // Against the closed form γ·x/‖x‖ element by element.
  std::vector<float> xv = x.to_vector<float>(), yv = xnorm(x, g, -1).to_vector<float>();
  const float gs[3] = {0.5f, -2.0f, 3.0f};
  for (int64_t r = 0; r < 2 * 3 * 5; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c) s += double(xv[r * 4 + c]) * xv[r * 4 + c];
    for (int c = 0; c < 4; ++c) CHECK(std::abs(yv[r * 4 + c] - gs[(r / 5) % 3] * xv[r * 4 + c] / std::sqrt(s)) < 1e-5);
  }
  // An all-zero slice gives zeros (F.normalize's clamp), not NaN.
  CHECK(amax(abs(xnorm(zeros({2, 4}), ones({1}), -1))).item() == 0);
}

TEST_CASE("UFO attention equals Eq. 6-8 written out; its context is dh x dh whatever N", "[models][ufo_vit]") {
  Generator gen(7);
  Tensor q = randn({2, 3, 5, 4}, DType::Float64, &gen), k = randn({2, 3, 9, 4}, DType::Float64, &gen),
         v = randn({2, 3, 9, 4}, DType::Float64, &gen);
  Tensor g = rand({3, 1, 1}, DType::Float64, &gen) + 0.5;
  CHECK(max_abs_diff(ufo_attention(q, k, v, g).to_vector<double>(), naive_ufo_attention(q, k, v, g)) < 1e-12);
  // Linear cost: the only token-by-anything product is kᵀv, and it is [B, h, dh, dh] for any N.
  for (int64_t N : {1, 9, 200}) {
    Tensor kn = randn({2, 3, N, 4}, DType::Float64, &gen), vn = randn({2, 3, N, 4}, DType::Float64, &gen);
    Tensor ctx = ufo_context(kn, vn, ones({3, 1, 1}, DType::Float64));
    CHECK(ctx.shape() == Shape{2, 3, 4, 4});
    CHECK(testing::max_abs_diff(norm(ctx, {-2}), ones({2, 3, 4}, DType::Float64)) < 1e-12);  // unit columns
    CHECK(ufo_attention(q, kn, vn, g).shape() == Shape{2, 3, 5, 4});
  }
}

TEST_CASE("UFO attention has no positional mixing: permuting tokens permutes the output", "[models][ufo_vit]") {
  nn::UFOAttention attn(8, 6, 2);
  Tensor x = randn({2, 7, 8});
  Tensor perm = from_vector(std::vector<int64_t>{3, 0, 6, 1, 5, 2, 4}, {7});
  CHECK(testing::max_abs_diff(index_select(attn.forward(x), 1, perm), attn.forward(index_select(x, 1, perm))) < 1e-5);
  // The class token's update does not depend on the order of the patch tokens.
  nn::UFOClassAttention ca(8, 6, 2);
  Tensor cls = x.narrow(1, 0, 1), patches = x.narrow(1, 1, 6);
  Tensor pperm = from_vector(std::vector<int64_t>{5, 2, 0, 4, 1, 3}, {6});
  Tensor a = ca.forward(x), b = ca.forward(cat({cls, index_select(patches, 1, pperm)}, 1));
  CHECK(a.shape() == Shape{2, 1, 8});
  CHECK(testing::max_abs_diff(a, b) < 1e-5);
}

// Layers, not ops: each composes ops the op table checks one by one (tests/op_samples/).
TEST_CASE("xnorm, UFO attention, UFO class attention and the UFO block pass gradcheck", "[models][ufo_vit]") {
  auto xn = [](const std::vector<Tensor>& in) { return xnorm(in[0], in[1], -2); };
  CHECK_GRADS(xn, {testing::leaf({2, 3, 4, 5}), testing::leaf({3, 1, 1}, 0.5, 1.5, 2)});
  // A non-contiguous (permuted) input, normalised along the filter axis.
  CHECK_GRADS(
      [](const std::vector<Tensor>& in) {
        return xnorm(in[0].permute({0, 2, 1}), in[1], -1);
      },
      {testing::leaf({2, 4, 3}), testing::leaf({1}, 0.5, 1.5, 3)});

  nn::UFOAttention attn(8, 6, 2);
  attn.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return attn.forward(in[0]); },
              {testing::leaf({2, 5, 8}), attn.gamma, attn.qkv->weight, attn.proj->bias});
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return attn.forward(in[0].transpose(0, 1)); },
              {testing::leaf({5, 2, 8}, -1, 1, 4)});

  nn::UFOClassAttention ca(8, 6, 2);
  ca.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return ca.forward(in[0]); },
              {testing::leaf({2, 5, 8}), ca.gamma, ca.q->weight, ca.k->bias, ca.v->weight});

  UFOBlock block(8, 4, 2, 2.0, 0.7, 0.0, 0.0);
  block.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return block.forward(in[0], 2, 3); },
              {testing::leaf({1, 6, 8}), block.local_conv->weight, block.gamma3, block.attn->gamma});
  UFOClassAttentionBlock cab(8, 4, 2, 2.0, 0.7, 0.0);
  cab.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return cab.forward(in[0], in[1]); },
              {testing::leaf({1, 4, 8}), testing::leaf({1, 1, 8}, -1, 1, 5), cab.gamma_1});
}

TEST_CASE("resize_pos_embed: identity on the same grid, bicubic otherwise", "[models][ufo_vit]") {
  Tensor pos = randn({1, 6, 5});  // a 2x3 grid of width 5
  Tensor same = resize_pos_embed(pos, {2, 3}, {2, 3});
  CHECK(testing::max_abs_diff(same, pos) == 0);
  // Upsampling is ops' bicubic interpolate on the [1, d, gh, gw] map, tokens row-major.
  Tensor up = resize_pos_embed(pos, {2, 3}, {4, 5});
  CHECK(up.shape() == Shape{1, 20, 5});
  Tensor map = pos.transpose(1, 2).reshape({1, 5, 2, 3});
  Tensor ref = interpolate(map, {4, 5}, InterpolationMode::Bicubic).flatten(2).transpose(1, 2);
  CHECK(testing::max_abs_diff(up, ref) < 1e-6);
  // The bicubic weights sum to 1, so a constant table stays constant.
  CHECK(testing::max_abs_diff(resize_pos_embed(full({1, 4, 3}, 2.5), {2, 2}, {7, 7}), full({1, 49, 3}, 2.5)) < 1e-5);
  // A closed form: 2x upsampling of a 1x4 ramp along the columns. Output column 1 samples source
  // x = (1 + 0.5)/2 - 0.5 = 0.25, taps at -1, 0, 1, 2 clamped to columns 0, 0, 1, 2 (values 0, 0, 1, 2),
  // weighted by PyTorch's cubic convolution kernel (A = -0.75) at distances 1.25, 0.25, 0.75, 1.75.
  Tensor ramp = from_vector(std::vector<float>{0, 1, 2, 3}, {1, 4, 1});
  std::vector<float> r = resize_pos_embed(ramp, {1, 4}, {1, 8}).to_vector<float>();
  const double t = 0.25, A = -0.75;
  auto near = [&](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };       // |s| <= 1
  auto far = [&](double s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; };  // 1 < |s| < 2
  const double w[4] = {far(1 + t), near(t), near(1 - t), far(2 - t)};
  CHECK(std::abs(r[1] - (w[0] * 0 + w[1] * 0 + w[2] * 1 + w[3] * 2)) < 1e-6);
}

TEST_CASE("UFO-ViT loads weights trained at another resolution", "[models][ufo_vit]") {
  UfoVit a(small_config());  // 2x2 grid
  UfoVitConfig c = small_config();
  c.img_size = 48;  // 3x3 grid
  UfoVit b(c);
  CHECK_THROWS_WITH(b.load_state_dict(a.state_dict()), Catch::Contains("pos_embed"));
  nn::LoadReport report = b.load_weights(a.state_dict());
  CHECK(report.ok());
  CHECK(testing::max_abs_diff(b.pos_embed, resize_pos_embed(a.pos_embed, {2, 2}, {3, 3})) < 1e-7);
  CHECK(testing::max_abs_diff(b.head->weight, a.head->weight) == 0);
  CHECK(b.forward(randn({1, 3, 48, 48})).shape() == Shape{1, 5});
}

TEST_CASE("UFO-ViT errors are clear", "[models][ufo_vit]") {
  UfoVit m(small_config());
  CHECK_THROWS_WITH(m.forward(randn({1, 3, 48, 48})),
                    Catch::Contains("UfoVit") && Catch::Contains("[1, 3, 48, 48]") && Catch::Contains("img_size"));
  CHECK_THROWS_WITH(m.forward(randn({1, 1, 32, 32})), Catch::Contains("UfoVit"));
  CHECK_THROWS_WITH(nn::UFOAttention(8, 6, 4),
                    Catch::Contains("UFOAttention") && Catch::Contains("E 6") && Catch::Contains("num_heads 4"));
  CHECK_THROWS_WITH(nn::UFOClassAttention(8, 10, 3), Catch::Contains("UFOClassAttention") && Catch::Contains("E 10"));
  nn::UFOAttention attn(8, 6, 2);
  CHECK_THROWS_WITH(attn.forward(randn({2, 5, 7})), Catch::Contains("UFOAttention") && Catch::Contains("[2, 5, 7]"));
  CHECK_THROWS_WITH(attn.forward(randn({5, 8})), Catch::Contains("UFOAttention") && Catch::Contains("[5, 8]"));
  CHECK_THROWS_WITH(xnorm(randn({2, 3}), ones({1}, DType::Float64), -1),
                    Catch::Contains("xnorm") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(xnorm(randn({2, 3}), ones({1}), 2), Catch::Contains("xnorm") && Catch::Contains("dim 2"));
  CHECK_THROWS_WITH(ufo_context(randn({1, 2, 3, 4}), randn({1, 2, 5, 4}), ones({1})),
                    Catch::Contains("ufo_context") && Catch::Contains("[1, 2, 5, 4]"));
  CHECK_THROWS_WITH(resize_pos_embed(randn({1, 5, 8}), {2, 2}, {3, 3}),
                    Catch::Contains("resize_pos_embed") && Catch::Contains("[1, 5, 8]") && Catch::Contains("2x2"));
  UfoVitConfig bad = small_config();
  bad.img_size = 40;
  CHECK_THROWS_WITH(UfoVit{bad}, Catch::Contains("UfoVit") && Catch::Contains("multiple of patch size 16"));
  ModelOptions o;
  o.patch_size = 5;
  CHECK_THROWS_WITH(create_model("ufo_vit_t", o), Catch::Contains("patch size"));
}
