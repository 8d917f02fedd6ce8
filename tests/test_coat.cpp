// CoaT: parameter counts, state_dict keys and aliases equal timm's (timm's coat.py), forward and backward
// of reduced Lite and non-Lite models, the conv-attention layers against naive loops written from the
// paper's equations, their gradients, and the co-scale resampling weights.
#include <cmath>
#include <map>

#include "gradcheck.h"
#include "tessera/models/coat.h"
#include "tessera/models/registry.h"
#include "tessera/nn/init.h"

using namespace tessera;
using namespace tessera::models;

namespace {

int64_t state_dict_numel(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [k, t] : m.state_dict()) n += t.numel();
  return n;
}

// A small CoaT (C = 16 in every stage, 8 heads of 2 channels, 32x32 images: grids 8, 4, 2, 1).
CoatConfig small_config(int64_t parallel_depth) {
  CoatConfig c;
  c.img_size = 32;
  c.embed_dims = {16, 16, 16, 16};
  c.serial_depths = {1, 2, 1, 1};
  c.parallel_depth = parallel_depth;
  c.mlp_ratios = {2, 2, 2, 2};
  c.num_classes = 5;
  return c;
}

// Value of a float64 tensor at a multi-index (contiguous copy read row-major).
struct Reader {
  std::vector<double> v;
  Shape shape;
  explicit Reader(const Tensor& t) : v(t.to_vector<double>()), shape(t.shape()) {}
  double operator()(std::initializer_list<int64_t> idx) const {
    int64_t off = 0, d = 0;
    for (int64_t i : idx) off = off * shape[d++] + i;
    return v[off];
  }
};

// Depthwise k x k "same" convolution of channel c of an H x W map given by `at(y, x)`, at (y, x).
template <class At>
double depthwise_at(const Reader& w, const Reader& b, int64_t c, int64_t k, int64_t H, int64_t W, int64_t y, int64_t x,
                    At at) {
  double s = b({c});
  for (int64_t dy = 0; dy < k; ++dy)
    for (int64_t dx = 0; dx < k; ++dx) {
      const int64_t yy = y + dy - k / 2, xx = x + dx - k / 2;
      if (yy >= 0 && yy < H && xx >= 0 && xx < W) s += w({c, 0, dy, dx}) * at(yy, xx);
    }
  return s;
}

}  // namespace

TEST_CASE("CoaT parameter counts, state_dict sizes and alias numel equal timm's", "[models][coat]") {
  // Spec §3.4: params (deduplicated), state_dict numel with aliases, state_dict keys.
  struct Expected {
    const char* name;
    int64_t params, numel, keys;
  };
  const Expected expected[] = {
      {"coat_tiny", 5498540, 7860316, 546},          {"coat_mini", 10337004, 15015068, 546},
      {"coat_small", 21693908, 31813252, 546},       {"coat_lite_tiny", 5721960, 5784936, 216},
      {"coat_lite_mini", 11011560, 11095528, 216},   {"coat_lite_small", 19838504, 20009064, 376},
      {"coat_lite_medium", 44571048, 44948904, 596}, {"coat_lite_medium_384", 44571048, 44948904, 596}};
  nn::init::SkipInitGuard counted_not_drawn;  // counted, not drawn
  for (const Expected& e : expected) {
    INFO(e.name);
    auto m = create_model(e.name);
    CHECK(m->num_parameters() == e.params);
    CHECK(state_dict_numel(*m) == e.numel);
    CHECK(static_cast<int64_t>(m->state_dict().size()) == e.keys);
  }
  CHECK(create_model("coat_lite_medium_384")->default_img_size == 384);
}

TEST_CASE("CoaT state_dict keys and shapes are timm's; shared modules are aliases", "[models][coat]") {
  auto lite = create_model("coat_lite_tiny");
  nn::NamedTensors sd = lite->state_dict();
  std::map<std::string, Tensor> by_key(sd.begin(), sd.end());
  CHECK(sd[0].first == "cls_token1");
  CHECK(sd[3].first == "cls_token4");
  CHECK(sd[4].first == "patch_embed1.proj.weight");
  CHECK(sd.back().first == "head.bias");
  CHECK(by_key.at("cls_token4").shape() == Shape{1, 1, 320});
  CHECK(by_key.at("patch_embed2.proj.weight").shape() == Shape{128, 64, 2, 2});
  CHECK(by_key.at("patch_embed1.norm.bias").shape() == Shape{64});
  CHECK(by_key.at("cpe3.proj.weight").shape() == Shape{256, 1, 3, 3});
  CHECK(by_key.at("crpe1.conv_list.0.weight").shape() == Shape{16, 1, 3, 3});
  CHECK(by_key.at("crpe4.conv_list.1.weight").shape() == Shape{120, 1, 5, 5});
  CHECK(by_key.at("crpe4.conv_list.2.bias").shape() == Shape{120});
  CHECK(by_key.at("serial_blocks2.1.factoratt_crpe.qkv.weight").shape() == Shape{384, 128});
  CHECK(by_key.at("serial_blocks1.0.mlp.fc1.weight").shape() == Shape{512, 64});
  CHECK(by_key.at("norm4.weight").shape() == Shape{320});
  CHECK(by_key.count("norm2.weight") == 0);
  CHECK(by_key.count("aggregate.weight") == 0);
  // Alias paths name the very same tensors.
  CHECK(by_key.at("serial_blocks3.1.cpe.proj.weight").impl_ptr() == by_key.at("cpe3.proj.weight").impl_ptr());
  CHECK(by_key.at("serial_blocks3.0.factoratt_crpe.crpe.conv_list.2.weight").impl_ptr() ==
        by_key.at("crpe3.conv_list.2.weight").impl_ptr());

  auto full = create_model("coat_tiny");
  nn::NamedTensors fsd = full->state_dict();
  std::map<std::string, Tensor> f(fsd.begin(), fsd.end());
  CHECK(f.at("crpe2.conv_list.1.weight").shape() == Shape{57, 1, 5, 5});
  CHECK(f.at("parallel_blocks.5.norm13.weight").shape() == Shape{152});
  CHECK(f.at("parallel_blocks.0.factoratt_crpe4.qkv.weight").shape() == Shape{456, 152});
  CHECK(f.at("parallel_blocks.0.mlp2.fc1.weight").shape() == Shape{608, 152});
  CHECK(f.at("aggregate.weight").shape() == Shape{1, 3, 1});
  CHECK(f.at("aggregate.bias").shape() == Shape{1});
  CHECK(f.at("norm3.bias").shape() == Shape{152});
  CHECK(f.at("parallel_blocks.2.mlp4.fc2.weight").impl_ptr() == f.at("parallel_blocks.2.mlp2.fc2.weight").impl_ptr());
  CHECK(f.at("parallel_blocks.2.factoratt_crpe3.crpe.conv_list.0.bias").impl_ptr() ==
        f.at("crpe3.conv_list.0.bias").impl_ptr());
  CHECK(f.at("parallel_blocks.0.mlp3.fc1.weight").impl_ptr() != f.at("parallel_blocks.1.mlp3.fc1.weight").impl_ptr());
}

TEST_CASE("CoaT-Lite and CoaT run forward and backward; every parameter gets a gradient", "[models][coat]") {
  for (int64_t parallel : {0, 2}) {
    INFO("parallel_depth " << parallel);
    Coat m(small_config(parallel));
    Tensor logits = m.forward(randn({2, 3, 32, 32}));
    CHECK(logits.shape() == Shape{2, 5});
    logits.sum().backward();
    for (const auto& [name, p] : m.named_parameters()) {
      INFO(name);
      CHECK(p.grad().defined());
    }
    // Eval mode with the default rates is deterministic; the input size is fixed.
    m.eval();
    Tensor x = randn({1, 3, 32, 32});
    CHECK(testing::max_abs_diff(m.forward(x), m.forward(x)) == 0.0);
    CHECK_THROWS_WITH(m.forward(randn({1, 3, 64, 64})),
                      Catch::Contains("CoaT") && Catch::Contains("img_size") && Catch::Contains("[1, 3, 64, 64]"));
  }
}

TEST_CASE("CoaT rejects configurations it cannot build", "[models][coat][errors]") {
  CoatConfig c = small_config(1);
  c.embed_dims = {16, 16, 24, 16};
  CHECK_THROWS_WITH(Coat(c), Catch::Contains("parallel") && Catch::Contains("24"));
  c = small_config(0);
  c.img_size = 48;
  CHECK_THROWS_WITH(Coat(c), Catch::Contains("img_size") && Catch::Contains("48"));
  c = small_config(0);
  c.embed_dims = {16, 12, 16, 16};
  CHECK_THROWS_WITH(Coat(c), Catch::Contains("embed_dims[1] = 12"));
  nn::ConvPosEnc cpe(4);
  CHECK_THROWS_WITH(cpe.forward(randn({1, 6, 4}), 2, 2), Catch::Contains("ConvPosEnc") && Catch::Contains("[1, 6, 4]"));
}

TEST_CASE("CoaT loads its own state_dict through any alias path; disagreeing aliases are an error", "[models][coat]") {
  Coat a(small_config(1)), b(small_config(1));
  a.eval();
  b.eval();
  nn::NamedTensors state = a.state_dict();
  // Keep only one alias of the stage-2 CPE (drop the canonical cpe2.* and one serial-block path).
  nn::NamedTensors partial;
  for (const auto& kv : state)
    if (kv.first.rfind("cpe2.", 0) != 0 && kv.first.rfind("serial_blocks2.0.cpe.", 0) != 0) partial.push_back(kv);
  REQUIRE(partial.size() + 4 == state.size());
  CHECK(b.load_state_dict(partial).ok());
  Tensor x = randn({2, 3, 32, 32});
  CHECK(testing::max_abs_diff(a.forward(x), b.forward(x)) == 0.0);

  nn::NamedTensors conflicting = state;
  for (auto& [k, t] : conflicting)
    if (k == "parallel_blocks.0.mlp4.fc1.bias") t = t + 1.0;
  CHECK_THROWS_WITH(b.load_state_dict(conflicting), Catch::Contains("mlp2.fc1.bias") &&
                                                        Catch::Contains("mlp4.fc1.bias") &&
                                                        Catch::Contains("different values"));
}

TEST_CASE("FactorAttnConvRelPosEnc matches Eq. 12 computed with loops", "[models][coat]") {
  const int64_t B = 2, C = 16, h = 8, Ch = 2, H = 3, W = 4, N = 1 + H * W;
  auto crpe = std::make_shared<nn::ConvRelPosEnc>(Ch, h);
  nn::FactorAttnConvRelPosEnc attn(C, h, crpe);
  attn.to(DType::Float64);
  Tensor x = testing::leaf({B, N, C}, -1, 1, 7);
  Tensor y = attn.forward(x, H, W);
  REQUIRE(y.shape() == Shape{B, N, C});

  const Reader X(x), Wqkv(attn.qkv->weight), Bqkv(attn.qkv->bias), Wp(attn.proj->weight), Bp(attn.proj->bias);
  const int64_t kernels[3] = {3, 5, 7}, first_head[3] = {0, 2, 5};
  std::vector<double> ref(B * N * C);
  for (int64_t b = 0; b < B; ++b) {
    // q, k, v [h][N][Ch] from the qkv Linear (output channel part·C + head·Ch + c).
    auto proj_qkv = [&](int64_t part, int64_t hd, int64_t n, int64_t c) {
      const int64_t o = part * C + hd * Ch + c;
      double s = Bqkv({o});
      for (int64_t i = 0; i < C; ++i) s += X({b, n, i}) * Wqkv({o, i});
      return s;
    };
    std::vector<double> mixed(N * C);
    for (int64_t hd = 0; hd < h; ++hd) {
      std::vector<double> q(N * Ch), k(N * Ch), v(N * Ch);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < Ch; ++c) {
          q[n * Ch + c] = proj_qkv(0, hd, n, c);
          k[n * Ch + c] = proj_qkv(1, hd, n, c);
          v[n * Ch + c] = proj_qkv(2, hd, n, c);
        }
      // softmax(K) over the tokens, per channel (Eq. 3).
      for (int64_t c = 0; c < Ch; ++c) {
        double z = 0;
        for (int64_t n = 0; n < N; ++n) z += std::exp(k[n * Ch + c]);
        for (int64_t n = 0; n < N; ++n) k[n * Ch + c] = std::exp(k[n * Ch + c]) / z;
      }
      const int g = hd < 2 ? 0 : hd < 5 ? 1 : 2;  // window group of this head
      const Reader Wc((*crpe->conv_list)[g]->weight), Bc((*crpe->conv_list)[g]->bias);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c2 = 0; c2 < Ch; ++c2) {
          double fa = 0;
          for (int64_t c1 = 0; c1 < Ch; ++c1) {
            double kv = 0;
            for (int64_t m = 0; m < N; ++m) kv += k[m * Ch + c1] * v[m * Ch + c2];
            fa += q[n * Ch + c1] * kv;
          }
          double ev = 0;  // Eq. 10-11, zero for the CLS token
          if (n > 0) {
            const int64_t local = (hd - first_head[g]) * Ch + c2;
            ev = q[n * Ch + c2] * depthwise_at(Wc, Bc, local, kernels[g], H, W, (n - 1) / W, (n - 1) % W,
                                               [&](int64_t yy, int64_t xx) { return v[(1 + yy * W + xx) * Ch + c2]; });
          }
          mixed[n * C + hd * Ch + c2] = fa / std::sqrt(double(Ch)) + ev;
        }
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < C; ++o) {
        double s = Bp({o});
        for (int64_t i = 0; i < C; ++i) s += mixed[n * C + i] * Wp({o, i});
        ref[(b * N + n) * C + o] = s;
      }
  }
  CHECK(testing::max_abs_diff(y.to_vector<double>(), ref) < 1e-12);
}

TEST_CASE("ConvPosEnc adds a depthwise convolution to the image tokens only", "[models][coat]") {
  const int64_t B = 2, C = 3, H = 2, W = 3, N = 1 + H * W;
  nn::ConvPosEnc cpe(C);
  cpe.to(DType::Float64);
  Tensor x = testing::leaf({B, N, C}, -1, 1, 3);
  const Reader X(x), Y(cpe.forward(x, H, W)), Wc(cpe.proj->weight), Bc(cpe.proj->bias);
  double err = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      err = std::max(err, std::abs(Y({b, 0, c}) - X({b, 0, c})));
      for (int64_t n = 1; n < N; ++n) {
        const double conv = depthwise_at(Wc, Bc, c, 3, H, W, (n - 1) / W, (n - 1) % W, [&](int64_t yy, int64_t xx) {
          return X({b, 1 + yy * W + xx, c});
        });
        err = std::max(err, std::abs(Y({b, n, c}) - (X({b, n, c}) + conv)));
      }
    }
  CHECK(err < 1e-12);
}

TEST_CASE("co-scale resampling: CLS carried, bilinear weights as F.interpolate's", "[models][coat]") {
  // 8x8 grid of 1 channel; CLS = 100.
  const int64_t S = 8;
  std::vector<double> vals(1 + S * S);
  vals[0] = 100;
  for (int64_t i = 0; i < S * S; ++i) vals[1 + i] = std::sin(0.7 * i) + 0.1 * i;
  Tensor x = from_vector(vals, {1, 1 + S * S, 1});
  auto in = [&](int64_t y, int64_t xx) { return vals[1 + y * S + xx]; };
  // down x4: out[j] = 0.5 (in[4j+1] + in[4j+2]) per axis (not a 4x4 average).
  std::vector<double> d4 = resample_tokens(x, {S, S}, {2, 2}).to_vector<double>();
  REQUIRE(d4.size() == 5);
  CHECK(d4[0] == 100);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double e = 0.25 * (in(4 * i + 1, 4 * j + 1) + in(4 * i + 1, 4 * j + 2) + in(4 * i + 2, 4 * j + 1) +
                         in(4 * i + 2, 4 * j + 2));
      CHECK(std::abs(d4[1 + i * 2 + j] - e) < 1e-12);
    }
  // down x2: a 2x2 average.
  std::vector<double> d2 = resample_tokens(x, {S, S}, {4, 4}).to_vector<double>();
  CHECK(std::abs(d2[1 + 1 * 4 + 2] - 0.25 * (in(2, 4) + in(2, 5) + in(3, 4) + in(3, 5))) < 1e-12);
  // up x2 on a 1x2 grid -> 2x4: columns weights (1, .75/.25, .25/.75, 1) replicate the edges.
  Tensor small = from_vector(std::vector<double>{5, 1, 3}, {1, 3, 1});
  std::vector<double> u = resample_tokens(small, {1, 2}, {2, 4}).to_vector<double>();
  const std::vector<double> expected_up{5, 1, 1.5, 2.5, 3, 1, 1.5, 2.5, 3};
  CHECK(testing::max_abs_diff(u, expected_up) < 1e-12);
}

// Layers, not ops: each composes ops the op table checks one by one (tests/op_samples/).
TEST_CASE("conv-attention layers pass gradcheck", "[models][coat]") {
  const int64_t H = 2, W = 3, N = 1 + H * W;
  auto crpe = std::make_shared<nn::ConvRelPosEnc>(2, 8);
  nn::FactorAttnConvRelPosEnc attn(16, 8, crpe);
  attn.to(DType::Float64);
  // Input, a CRPE kernel (5x5 window) and the qkv bias (through q, k and v).
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return attn.forward(in[0], H, W); },
              {testing::leaf({1, N, 16}), (*crpe->conv_list)[1]->weight, (*crpe->conv_list)[2]->bias, attn.qkv->bias});
  // A non-contiguous input.
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return attn.forward(in[0].transpose(0, 1), H, W); },
              {testing::leaf({N, 1, 16})});

  nn::ConvPosEnc cpe(3);
  cpe.to(DType::Float64);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return cpe.forward(in[0].transpose(1, 2), H, W); },
              {testing::leaf({2, 3, N}), cpe.proj->weight, cpe.proj->bias});
  CHECK_GRADS(
      [&](const std::vector<Tensor>& in) {
        return resample_tokens(in[0], {4, 4}, {2, 2});
      },
      {testing::leaf({1, 17, 2})});
  CHECK_GRADS(
      [&](const std::vector<Tensor>& in) {
        return resample_tokens(in[0], {1, 2}, {4, 8});
      },
      {testing::leaf({2, 3, 2})});
}

TEST_CASE("small CoaT-Lite and CoaT match a PyTorch reference", "[models][coat]") {
  // Reference: a PyTorch 1.13 (float64) transcription of the CoaT paper's §3-4 (timm's CoaT: same names, shared
  // modules, F.interpolate(scale_factor=k, recompute_scale_factor=False, mode='bilinear',
  // align_corners=False)) for small_config(parallel) with weights
  //   p_j[i] = 0.5·sin(0.37·i + 0.11·j)  for the j-th tensor of model.named_parameters(), i row-major,
  // input img[i] = sin(0.05·i) of shape [2, 3, 32, 32], model.eval(); values are model(img).tolist().
  const std::vector<double> expected_lite{2.304714917924739,  2.854185676487465,  3.030228799228301,  2.809156172302034,
                                          2.2193299543398717, 2.3036664875517614, 2.8533156964658453, 3.029650767193342,
                                          2.8089454983407083, 2.2195141229872664};
  const std::vector<double> expected_full{
      -2.2516289227220883, -2.1269767280874827, -1.7227177822185378, -1.0912973386974452, -0.31512309830824164,
      -2.249456752606336,  -2.1231622809866884, -1.7177586910842186, -1.0858405667965707, -0.30988053636443025};
  Tensor img = sin(arange(0.0, 2.0 * 3 * 32 * 32, 1.0, DType::Float64) * 0.05).reshape({2, 3, 32, 32});
  for (int64_t parallel : {0, 1}) {
    INFO("parallel_depth " << parallel);
    Coat m(small_config(parallel));
    m.to(DType::Float64);
    m.eval();
    nn::NamedTensors params = m.named_parameters();
    {
      NoGradGuard no_grad;
      for (size_t j = 0; j < params.size(); ++j) {
        Tensor p = params[j].second;
        Tensor i = arange(0.0, static_cast<double>(p.numel()), 1.0, DType::Float64);
        p.copy_((sin(i * 0.37 + 0.11 * static_cast<double>(j)) * 0.5).reshape(p.shape()));
      }
    }
    CHECK(m.state_dict().size() == (parallel ? 216u : 156u));
    Tensor logits = m.forward(img);
    CHECK(testing::max_abs_diff(logits.to_vector<double>(), parallel ? expected_full : expected_lite) < 1e-10);
  }
}
