// The module system: timm-style dotted names (with index gaps for parameter-less children),
// aliases, strict/non-strict loading, train/eval, and the basic layers.
#include "gradcheck.h"
#include "tessera/nn/init.h"
#include "tessera/nn/layers.h"

using namespace tessera;
using namespace tessera::nn;
using namespace tessera::testing;

namespace {

std::vector<std::string> keys(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [k, t] : named) out.push_back(k);
  return out;
}

// conv -> BN, GELU, conv -> BN: the shape of XCiT's patch-embedding stem.
std::shared_ptr<Sequential> stem() {
  auto s = std::make_shared<Sequential>();
  auto unit = [](int64_t in, int64_t out) {
    auto u = std::make_shared<Sequential>();
    u->push_back(std::make_shared<Conv2d>(in, out, std::array<int64_t, 2>{3, 3}, std::array<int64_t, 2>{2, 2},
                                          std::array<int64_t, 2>{1, 1}, 1, false));
    u->push_back(std::make_shared<BatchNorm2d>(out));
    return u;
  };
  s->push_back(unit(3, 4));
  s->push_back(std::make_shared<GELU>());
  s->push_back(unit(4, 8));
  return s;
}

// A child registered under two names, as CoaT shares one CPE per stage.
struct Shared : Module {
  std::shared_ptr<Linear> a, b;
  Tensor scale;
  Shared() {
    scale = register_parameter("scale", ones({2}));
    a = register_module("a", std::make_shared<Linear>(2, 2));
    b = register_module("b", a);
  }
};

}  // namespace

TEST_CASE("state_dict names follow PyTorch, index gaps included", "[nn]") {
  auto s = stem();
  CHECK(keys(s->state_dict()) == std::vector<std::string>{"0.0.weight", "0.1.weight", "0.1.bias", "0.1.running_mean",
                                                          "0.1.running_var", "0.1.num_batches_tracked", "2.0.weight",
                                                          "2.1.weight", "2.1.bias", "2.1.running_mean",
                                                          "2.1.running_var", "2.1.num_batches_tracked"});
  CHECK(keys(s->named_parameters()) ==
        std::vector<std::string>{"0.0.weight", "0.1.weight", "0.1.bias", "2.0.weight", "2.1.weight", "2.1.bias"});
  CHECK(s->num_parameters() == 4 * 3 * 9 + 8 + 8 * 4 * 9 + 16);
  for (const Tensor& p : s->parameters()) CHECK(p.requires_grad());
  Tensor y = s->forward(randn({2, 3, 8, 8}));
  CHECK(y.shape() == Shape{2, 8, 2, 2});
}

TEST_CASE("aliases appear under every path in state_dict and once in parameters", "[nn]") {
  Shared m;
  CHECK(keys(m.state_dict()) == std::vector<std::string>{"scale", "a.weight", "a.bias", "b.weight", "b.bias"});
  CHECK(keys(m.named_parameters()) == std::vector<std::string>{"scale", "a.weight", "a.bias"});
  CHECK(m.num_parameters() == 2 + 4 + 2);

  // Loading through either alias path works; disagreeing aliases are an error.
  NamedTensors only_b = {{"scale", ones({2})}, {"b.weight", full({2, 2}, 3.0)}, {"b.bias", zeros({2})}};
  CHECK(m.load_state_dict(only_b).ok());
  CHECK(m.a->weight.to_vector<float>() == std::vector<float>(4, 3.f));
  NamedTensors both = m.state_dict();
  both[1].second = full({2, 2}, 5.0);
  CHECK_THROWS_WITH(m.load_state_dict(both),
                    Catch::Contains("a.weight") && Catch::Contains("b.weight") && Catch::Contains("different values"));
}

TEST_CASE("strict loading reports every problem at once; non-strict returns them", "[nn][errors]") {
  auto s = stem();
  NamedTensors state = s->state_dict();
  state.erase(state.begin());                      // 0.0.weight missing
  state.emplace_back("extra.weight", zeros({1}));  // unexpected
  state[0].second = zeros({5});                    // 0.1.weight wrong shape
  try {
    s->load_state_dict(state);
    FAIL("expected an error");
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK(msg.find("missing") != std::string::npos);
    CHECK(msg.find("0.0.weight") != std::string::npos);
    CHECK(msg.find("extra.weight") != std::string::npos);
    CHECK(msg.find("0.1.weight: file [5] vs model [4]") != std::string::npos);
  }
  LoadReport r = s->load_state_dict(state, /*strict=*/false);
  CHECK(r.missing == std::vector<std::string>{"0.0.weight"});
  CHECK(r.unexpected == std::vector<std::string>{"extra.weight"});
  CHECK(r.mismatched.size() == 1);
}

TEST_CASE("loading copies values in place and converts dtypes", "[nn]") {
  Linear l(3, 2);
  Tensor w_handle = l.weight;
  NamedTensors state = {{"weight", arange(6).to(DType::Float16).reshape({2, 3})},
                        {"bias", from_vector(std::vector<double>{1, 2}, {2})}};
  l.load_state_dict(state);
  CHECK(w_handle.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(l.bias.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(l.weight.requires_grad());
}

TEST_CASE("train/eval switches batch norm statistics and dropout", "[nn]") {
  BatchNorm2d bn(3);
  Tensor x = randn({4, 3, 5, 5}) * 2.0 + 1.0;
  bn.forward(x);
  CHECK(bn.num_batches_tracked.item() == 1);
  std::vector<float> mean_after_train = bn.running_mean.to_vector<float>();
  CHECK(mean_after_train[0] != 0.0f);
  bn.eval();
  CHECK(!bn.is_training());
  bn.forward(x);
  CHECK(bn.running_mean.to_vector<float>() == mean_after_train);
  CHECK(bn.num_batches_tracked.item() == 1);

  auto seq = stem();
  seq->eval();
  CHECK(!(*seq)[0]->is_training());
  Dropout d(0.5);
  d.eval();
  CHECK(d.forward(x).is_same(x));
}

TEST_CASE("drop_path drops whole samples and scales the survivors", "[nn]") {
  Tensor x = ones({2000, 3, 4});
  Generator gen(5);
  Tensor y = drop_path(x, 0.25, true, &gen);
  std::vector<float> v = y.to_vector<float>();
  int64_t kept = 0, mixed = 0, bad_scale = 0;
  for (int64_t s = 0; s < 2000; ++s) {
    float first = v[s * 12];
    for (int64_t i = 1; i < 12; ++i) mixed += v[s * 12 + i] != first;  // one decision per sample
    bad_scale += !(first == 0.0f || std::abs(first - 1.0f / 0.75f) < 1e-6f);
    kept += first != 0.0f;
  }
  CHECK(mixed == 0);
  CHECK(bad_scale == 0);
  CHECK(kept == Approx(1500).margin(5 * std::sqrt(2000 * 0.25 * 0.75)));
  CHECK(drop_path(x, 0.25, false).is_same(x));  // its gradient check is a sample (tests/op_samples/elementwise.cpp)
  CHECK_THROWS_WITH(drop_path(x, 1.0, true), Catch::Contains("drop_path"));
}

TEST_CASE("default initialisation bounds follow PyTorch", "[nn]") {
  Linear l(100, 50);
  double bound = 1.0 / std::sqrt(100.0);
  CHECK(amax(abs(l.weight)).item() <= bound);
  CHECK(amax(abs(l.bias)).item() <= bound);
  CHECK(amax(abs(l.weight)).item() > 0.9 * bound);
  Conv2d c(8, 8, {3, 3}, {1, 1}, {1, 1}, 8);  // depthwise: fan_in = 9
  CHECK(c.weight.shape() == Shape{8, 1, 3, 3});
  CHECK(amax(abs(c.weight)).item() <= 1.0 / 3.0);
  CHECK_THROWS_WITH(Conv2d(6, 8, {3, 3}, {1, 1}, {1, 1}, 4), Catch::Contains("groups"));
}

TEST_CASE("SkipInitGuard leaves parameters undrawn while it lives, and nests", "[nn]") {
  Tensor t = full({64}, 7.0);
  std::vector<std::string> skipped_keys;
  {
    init::SkipInitGuard outer;
    {
      init::SkipInitGuard inner;
      CHECK(init::SkipInitGuard::active());
    }
    CHECK(init::SkipInitGuard::active());  // the inner guard restores the outer state, not "off"
    init::trunc_normal_(t, 0.02);
    init::uniform_(t, -1, 1);
    init::constant_(t, 0.0);
    CHECK(amax(abs(t - 7.0)).item() == 0.0);
    Shared skipped;
    skipped_keys = keys(skipped.state_dict());
  }
  CHECK_FALSE(init::SkipInitGuard::active());
  Shared drawn;  // the same architecture either way
  CHECK(skipped_keys == keys(drawn.state_dict()));
  init::constant_(t, 0.0);
  CHECK(amax(abs(t)).item() == 0.0);
  Linear l(100, 50);  // drawn again once the guard is gone
  CHECK(amax(abs(l.weight)).item() > 0.9 / std::sqrt(100.0));
}

TEST_CASE("module errors name the module", "[nn][errors]") {
  GELU g;
  CHECK_THROWS_WITH(Linear(0, 3), Catch::Contains("Linear"));
  CHECK_THROWS_WITH(BatchNorm2d(3).forward(zeros({2, 3})), Catch::Contains("BatchNorm2d") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(Dropout(1.5), Catch::Contains("Dropout"));
  Shared m;
  NamedTensors dup = {{"scale", ones({2})}, {"scale", ones({2})}};
  CHECK_THROWS_WITH(m.load_state_dict(dup), Catch::Contains("twice"));
}
