// Mixed precision on device cuda (core/autocast.h, train/grad_scaler.h): autocast GEMMs and
// convolutions against a float32 reference of the same rounded operands, the loss scaler's
// skip/backoff/growth with injected infinities, TF32, and a mixed-precision training run.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "tessera/models/xcit.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/optim.h"
#include "tests/device_check.h"
#include "tests/kernel_calls.h"
#include "tests/sanitized.h"
#include "tests/train_fixtures.h"
#include "tessera/train/grad_scaler.h"
#include "tessera/train/trainer.h"

using namespace tessera;
using testing::compare_values;
using testing::DeviceCheckOptions;
using testing::KernelCalls;
using testing::randu;

namespace {

// bfloat16 keeps 8 significant bits (relative rounding 2^-9) and float16 11 (2^-12): results of
// low-precision GEMMs agree with a float32 reference of the same rounded operands to a few
// roundings of the output, measured against the tensor's largest value.
DeviceCheckOptions tolerance(DType dtype) {
  DeviceCheckOptions opt;
  opt.rtol = dtype == DType::BFloat16 ? 1.6e-2 : 2e-3;
  opt.atol = 0;
  opt.relative_to_max = true;
  return opt;
}

Tensor rounded(const Tensor& t, DType dtype) { return t.to(dtype).to(DType::Float32); }

}  // namespace

TEST_CASE("autocast runs matmul, linear and conv2d in bfloat16 and float16 on cuda", "[cuda][amp]") {
  const Device dev = testing::test_devices().front();
  const Tensor a = randu({3, 8, 16}), b = randu({16, 12}, -1, 1, 2), w = randu({12, 16}, -0.5, 0.5, 3);
  const Tensor bias = randu({12}, -0.5, 0.5, 4), x = randu({2, 3, 9, 9}), k = randu({5, 3, 3, 3}, -0.5, 0.5, 5);
  const Tensor kb = randu({5}, -0.5, 0.5, 6);
  for (AmpActivations activations : {AmpActivations::Low, AmpActivations::Float32})
    for (DType low : {DType::BFloat16, DType::Float16}) {
      INFO(dtype_name(low) << ", activations " << amp_activations_name(activations));
      set_amp_activations(activations);
      Tensor mm, lin, conv;
      {
        AutocastGuard autocast(DeviceType::CUDA, low);
        mm = matmul(a.to(dev), b.to(dev));
        lin = linear(a.to(dev), w.to(dev), bias.to(dev));
        conv = conv2d(x.to(dev), k.to(dev), kb.to(dev), {2, 2}, {1, 1});
      }
      set_amp_activations(AmpActivations::Low);
      // Results in the low precision, or float32 with float32 activations; computed from operands
      // rounded to `low` (and, for matmul and linear, a result rounded to `low`: the GEMM's output).
      const DType out = activations == AmpActivations::Low ? low : DType::Float32;
      CHECK(mm.dtype() == out);
      CHECK(lin.dtype() == out);
      CHECK(conv.dtype() == out);
      CHECK(compare_values(mm.to(DType::Float32), rounded(matmul(rounded(a, low), rounded(b, low)), low),
                           tolerance(low)) == "");
      CHECK(compare_values(lin.to(DType::Float32),
                           rounded(linear(rounded(a, low), rounded(w, low), rounded(bias, low)), low),
                           tolerance(low)) == "");
      CHECK(compare_values(conv.to(DType::Float32), conv2d(rounded(x, low), rounded(k, low), kb, {2, 2}, {1, 1}),
                           tolerance(low)) == "");
    }
}

TEST_CASE("autocast gradients flow back through the low-precision GEMM to float32 leaves", "[cuda][amp]") {
  const Device dev = testing::test_devices().front();
  const Tensor x0 = randu({4, 6, 16}), w0 = randu({10, 16}, -0.5, 0.5, 2), b0 = randu({10}, -0.5, 0.5, 3);
  auto run = [&](Device d, bool amp) {
    Tensor x = x0.to(d).detach().set_requires_grad(true), w = w0.to(d).detach().set_requires_grad(true);
    Tensor b = b0.to(d).detach().set_requires_grad(true);
    {
      std::optional<AutocastGuard> autocast;
      if (amp) autocast.emplace(d.type, DType::BFloat16);
      (linear(x, w, b) * linear(x, w, b)).sum().backward();
    }
    return std::vector<Tensor>{x.grad(), w.grad(), b.grad()};
  };
  const auto got = run(dev, true), want = run(Device::cpu(), false);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("gradient " << i);
    CHECK(got[i].dtype() == DType::Float32);  // the leaves' own dtype: the casts' gradients bring it back
    CHECK(compare_values(got[i], want[i], tolerance(DType::BFloat16)) == "");
  }
}

TEST_CASE("autocast takes bfloat16 or float16 only, with the reason", "[cuda][amp]") {
  CHECK_THROWS_WITH(AutocastGuard(DeviceType::CUDA, DType::Float64), Catch::Contains("bfloat16 or float16"));
}

TEST_CASE("TF32 rounds float32 GEMM operands to 10 mantissa bits only when allowed", "[cuda][amp]") {
  const Device dev = testing::test_devices().front();
  // Operands exact in TF32 give the same product either way; others differ after rounding.
  const Tensor a = randu({8, 64}, -1, 1, 11), b = randu({64, 8}, -1, 1, 12);
  const Tensor exact = matmul(a.to(dev), b.to(dev));
  set_allow_tf32(true);
  const Tensor tf32 = matmul(a.to(dev), b.to(dev));
  set_allow_tf32(false);
  DeviceCheckOptions close;
  close.rtol = 2e-3;  // TF32 rounds to 2^-11
  close.atol = 0;
  close.relative_to_max = true;
  CHECK(compare_values(tf32, exact, close) == "");
  CHECK(compare_values(tf32, exact, DeviceCheckOptions{}) != "");  // but it did round
  CHECK(compare_values(matmul(a.to(dev), b.to(dev)), matmul(a, b), DeviceCheckOptions{}) == "");
}

TEST_CASE("unscale_ divides gradients and flags infinities on every device", "[cuda][amp]") {
  const Tensor g = randu({1000}) * 1024.0;
  testing::check_update_on_devices("unscale_", {g, g * 2.0}, [](testing::Inputs& t) {
    const Tensor found = unscale_(t, full({}, 1.0 / 1024, DType::Float64, t[0].device()));
    t.push_back(found);
  });
  for (const Device& d : {Device::cpu(), testing::test_devices().front()}) {
    INFO(d.str());
    Tensor bad = g.to(d).clone();
    bad.narrow(0, 500, 1).fill_(std::numeric_limits<double>::infinity());
    CHECK(unscale_({g.to(d).clone(), bad}, full({}, 0.5, DType::Float64, d)).item() == 1.0);
    Tensor nan = g.to(d).clone();
    nan.narrow(0, 7, 1).fill_(std::nan(""));
    CHECK(unscale_({nan}, full({}, 0.5, DType::Float64, d)).item() == 1.0);
    CHECK(unscale_({g.to(d).clone()}, full({}, 0.5, DType::Float64, d)).item() == 0.0);
  }
}

TEST_CASE("the loss scaler skips overflowing steps, backs off and grows", "[cuda][amp]") {
  const Device dev = testing::test_devices().front();
  train::GradScaler scaler(1024.0, 2.0, 0.5, 3);
  Tensor p = zeros({4}, DType::Float32, dev).set_requires_grad(true);
  auto step = [&](double g) {
    p.set_grad(full({4}, g, DType::Float32, dev));
    const bool finite = scaler.unscale_({p});
    scaler.update(finite);
    return finite;
  };
  CHECK(step(2048.0));
  CHECK(p.grad().to_vector<float>() == std::vector<float>(4, 2.0f));  // unscaled
  CHECK_FALSE(step(std::numeric_limits<double>::infinity()));
  CHECK(scaler.scale_value() == 512.0);
  CHECK(scaler.skipped_steps() == 1);
  CHECK(step(1.0));
  CHECK(step(1.0));
  CHECK(scaler.scale_value() == 512.0);
  CHECK(step(1.0));  // the third clean step in a row
  CHECK(scaler.scale_value() == 1024.0);
  // Its state survives a checkpoint.
  train::GradScaler restored;
  restored.load_state_dict(scaler.state_dict());
  CHECK(restored.scale_value() == 1024.0);
  CHECK(restored.skipped_steps() == 1);
}

TEST_CASE("mixed-precision training runs on cuda, and float16 is refused on the CPU", "[cuda][amp]") {
  const Device dev = testing::test_devices().front();
  // Random 28x28 images of 2 classes: a small XCiT fits them in a few steps.
  class Noise : public data::Dataset {
   public:
    int64_t size() const override { return 16; }
    data::Sample get(int64_t i) const override {
      data::Sample s{data::Image(28, 28, 1), i % 2};
      for (int64_t p = 0; p < 28 * 28; ++p) s.image.pixels[p] = static_cast<uint8_t>(s.label ? (p * 7) % 256 : 40);
      return s;
    }
    const std::vector<std::string>& classes() const override { return classes_; }
    std::string describe(int64_t i) const override { return std::to_string(i); }

   private:
    std::vector<std::string> classes_{"a", "b"};
  };
  auto set = std::make_shared<Noise>();
  for (DType low : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(low));
    manual_seed(1);
    models::XcitConfig c;
    c.img_size = 28, c.patch_size = 4, c.embed_dim = 16, c.depth = 1, c.num_heads = 2, c.mlp_ratio = 2;
    c.in_chans = 1, c.num_classes = 2;
    auto model = std::make_shared<models::Xcit>(c);
    model->to(dev);
    train::TrainOptions o = testing::square_options("", 8);
    o.train_transform.primary = "none";
    o.train_transform.hflip = 0;
    // Under the sanitizers one epoch runs the same code (scaled steps, the scaler, the cast
    // weights, eval); that the loss falls is the Release suite's to show.
    o.epochs = testing::kSanitized ? 1 : 3;
    o.warmup_epochs = 0;
    o.lr = 3e-3;
    o.amp = low;
    const auto rows = train::Trainer(model, set, set, o).fit();
    REQUIRE(rows.size() == static_cast<size_t>(o.epochs));
    CHECK(std::isfinite(rows.back().train_loss));
    // float16 may spend its first steps finding a loss scale that does not overflow (skipped
    // updates); bfloat16 needs none, and its six updates must already lower the loss.
    if (low == DType::BFloat16 && !testing::kSanitized) CHECK(rows.back().train_loss < rows.front().train_loss);
  }
  // The CPU refuses float16 before any work (its bfloat16: tests/test_cpu_bf16_models.cpp).
  train::TrainOptions o;
  o.amp = DType::Float16;
  o.loader.batch_size = 8;
  manual_seed(1);
  models::XcitConfig c;
  c.img_size = 28, c.patch_size = 4, c.embed_dim = 16, c.depth = 1, c.num_heads = 2, c.in_chans = 1, c.num_classes = 2;
  CHECK_THROWS_WITH(train::Trainer(std::make_shared<models::Xcit>(c), set, set, o),
                    Catch::Contains("float16 runs on cuda only"));
}

TEST_CASE("weights cast ahead under autocast give the per-use casts' bits in one launch each way", "[cuda][amp]") {
  const Device dev = testing::test_devices().front();
  const auto param = [&](const Shape& shape, uint64_t seed) {
    return randu(shape, -0.5, 0.5, seed).to(dev).detach().set_requires_grad(true);
  };
  // A linear with its bias, a position table met by an activation, a norm whose weight is read in
  // float32 (not cast), and a linear whose weight is used twice.
  const std::vector<Tensor> params{param({8, 16}, 1), param({8}, 2), param({5, 8}, 3),
                                   param({8}, 4),     param({8}, 5), param({4, 8}, 6)};
  const Tensor x = randu({2, 5, 16}, -1, 1, 7).to(dev);
  const auto pass = [&](AutocastWeights& casts) {
    for (const Tensor& p : params) p.set_grad(Tensor());
    Tensor loss;
    {
      AutocastGuard autocast(dev.type, DType::BFloat16);
      AutocastWeights::Pass weights(casts, dev);
      const Tensor h = layer_norm(linear(x, params[0], params[1]) + params[2], params[3], params[4]);
      loss = (linear(h, params[5]) * linear(gelu(h), params[5])).to(DType::Float32).sum();
    }
    loss.backward();
    std::vector<std::vector<float>> values{loss.to(Device::cpu()).to_vector<float>()};
    for (const Tensor& p : params) values.push_back(p.grad().to(Device::cpu()).to_vector<float>());
    return values;
  };
  AutocastWeights per_use(false), ahead;
  const auto want = pass(per_use);
  CHECK(pass(ahead) == want);  // the first pass learns which weights are cast
  KernelCalls counted;
  CHECK(pass(ahead) == want);
  // Four weights are cast ahead (w1, b1, the position table, w2; not the norm's): one launch
  // forward, one backward. w2's second use reads the same copy, and its gradient goes back to
  // float32 on its own (one copy launch), so that its two gradients meet in float32 as per-use
  // casts' do.
  CHECK(counted.calls["cast_all"] == 2);
  KernelCalls counted_per_use;
  CHECK(pass(per_use) == want);
  CHECK(counted_per_use.calls["cast_all"] == 0);
  CHECK(counted_per_use.calls["copy"] - counted.calls["copy"] == 9);  // 5 casts each way against 1
}
