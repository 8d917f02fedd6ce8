// Activation checkpointing (nn/checkpoint.h, Model::grad_checkpointing): the same outputs and the
// same gradients as without it, dropout masks drawn again identically, BatchNorm's running
// statistics updated once, less memory kept for the backward pass, and plain calls where no
// gradient is wanted.
#include "gradcheck.h"
#include "tessera/autograd/node.h"
#include "tessera/models/registry.h"
#include "tessera/nn/checkpoint.h"
#include "tessera/nn/layers.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// The gradients of every parameter of `m` after one backward pass, by name.
std::vector<std::pair<std::string, Tensor>> parameter_grads(nn::Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : m.named_parameters())
    out.emplace_back(name, p.grad().defined() ? p.grad().clone() : Tensor());
  return out;
}

}  // namespace

TEST_CASE("checkpoint: the same output and gradients, dropout masks drawn again identically", "[checkpoint]") {
  nn::Linear fc1(6, 8), fc2(8, 6);
  fc1.to(DType::Float64);
  fc2.to(DType::Float64);
  auto block = [&](const Tensor& t) { return fc2.forward(dropout(gelu(fc1.forward(t)), 0.5, true)) + t; };
  Generator gen(3);
  const Tensor x0 = randn({4, 5, 6}, DType::Float64, &gen);

  auto run = [&](bool checkpointed) {
    fc1.zero_grad();
    fc2.zero_grad();
    manual_seed(11);
    Tensor x = x0.clone().set_requires_grad();
    Tensor y = checkpointed ? nn::checkpoint(block, x) : block(x);
    CHECK(y.requires_grad());
    (y * y).sum().backward();
    std::vector<std::pair<std::string, Tensor>> grads = parameter_grads(fc1);
    for (auto& g : parameter_grads(fc2)) grads.push_back(std::move(g));
    grads.emplace_back("x", x.grad());
    grads.emplace_back("y", y.detach());
    // What the generator reached: a checkpoint leaves it where the forward left it.
    grads.emplace_back("rng",
                       from_vector(std::vector<int64_t>{static_cast<int64_t>(default_generator().offset())}, {1}));
    return grads;
  };
  const auto plain = run(false), checkpointed = run(true);
  REQUIRE(plain.size() == checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO(plain[i].first);
    REQUIRE(checkpointed[i].second.defined());
    CHECK(max_abs_diff(plain[i].second.to(DType::Float64), checkpointed[i].second.to(DType::Float64)) == 0.0);
  }
}

// Activation checkpointing recomputes a module's forward in backward: a module-level check.
TEST_CASE("checkpoint passes gradcheck", "[checkpoint][grad]") {
  nn::Linear fc(5, 5);
  fc.to(DType::Float64);
  Generator gen(4);
  // A non-contiguous input, and a parameter's gradient reached only through the recomputation.
  const Tensor x = randn({5, 3}, DType::Float64, &gen).t().set_requires_grad();
  CHECK_GRADS(([&](const std::vector<Tensor>& in) {
                return nn::checkpoint([&](const Tensor& t) { return tanh(fc.forward(t)) * t; }, in[0]);
              }),
              {x});
  fc.zero_grad();
  nn::checkpoint([&](const Tensor& t) { return fc.forward(t); }, x).sum().backward();
  REQUIRE(fc.weight.grad().defined());
  CHECK(max_abs_diff(fc.bias.grad(), full({5}, 3.0, DType::Float64)) < 1e-12);
}

TEST_CASE("checkpoint: BatchNorm's running statistics are updated once", "[checkpoint]") {
  Generator gen(5);
  const Tensor x0 = randn({4, 3, 5, 5}, DType::Float32, &gen);
  auto stats = [&](bool checkpointed) {
    nn::BatchNorm2d bn(3);
    bn.train();
    Tensor x = x0.clone().set_requires_grad();
    Tensor y = checkpointed ? nn::checkpoint([&](const Tensor& t) { return bn.forward(t); }, x) : bn.forward(x);
    (y * y).sum().backward();
    return std::vector<Tensor>{bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone(),
                               x.grad()};
  };
  const auto plain = stats(false), checkpointed = stats(true);
  CHECK(max_abs_diff(plain[0], checkpointed[0]) == 0.0);
  CHECK(max_abs_diff(plain[1], checkpointed[1]) == 0.0);
  CHECK(checkpointed[2].item() == 1.0);
  CHECK(max_abs_diff(plain[3], checkpointed[3]) < 1e-6);
}

TEST_CASE("checkpoint without a gradient to compute is a plain call", "[checkpoint]") {
  nn::Linear fc(4, 4);
  const Tensor x = ones({2, 4});  // requires no grad
  Tensor y = nn::checkpoint([&](const Tensor& t) { return fc.forward(t); }, x);
  CHECK(y.requires_grad());  // recorded as usual: fc's parameters get their gradients
  CHECK(y.grad_fn()->name() == "LinearBackward");
  NoGradGuard no_grad;
  CHECK_FALSE(
      nn::checkpoint([&](const Tensor& t) { return fc.forward(t); }, x.clone().set_requires_grad()).requires_grad());
}

TEST_CASE("grad_checkpointing: every family trains to the same gradients with less memory kept",
          "[checkpoint][models]") {
  const std::vector<std::pair<std::string, models::ModelOptions>> cases = {
      {"xcit_nano_12_p16_224",
       {.num_classes = 5, .img_size = 32, .patch_size = 4, .drop_path_rate = 0.2, .model_kwargs = {{"depth", 3}}}},
      {"cait_xxs24_224",
       {.num_classes = 5, .img_size = 32, .patch_size = 8, .drop_path_rate = 0.2, .model_kwargs = {{"depth", 3}}}},
      {"coat_lite_tiny", {.num_classes = 5, .img_size = 32, .drop_path_rate = 0.2}},
      {"ufo_vit_t",
       {.num_classes = 5, .img_size = 32, .patch_size = 8, .drop_path_rate = 0.2, .model_kwargs = {{"depth", 3}}}},
  };
  for (const auto& [name, options] : cases) {
    INFO(name);
    Generator gen(6);
    const Tensor images = randn({4, 3, 32, 32}, DType::Float32, &gen);
    const Tensor labels = from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4});
    auto step = [&](bool checkpointed, int64_t* kept_bytes) {
      manual_seed(7);
      auto model = models::create_model(name, options);
      model->grad_checkpointing = checkpointed;
      model->train();
      manual_seed(8);
      const int64_t before = memory_stats(DeviceType::CPU).allocated_bytes;
      Tensor loss = cross_entropy(model->forward(images), labels);
      *kept_bytes = memory_stats(DeviceType::CPU).allocated_bytes - before;  // what the backward will need
      loss.backward();
      auto grads = parameter_grads(*model);
      grads.emplace_back("loss", loss.detach());
      for (const auto& [buffer, value] : model->named_buffers()) grads.emplace_back(buffer, value.clone());
      return grads;
    };
    int64_t kept_plain = 0, kept_checkpointed = 0;
    const auto plain = step(false, &kept_plain), checkpointed = step(true, &kept_checkpointed);
    REQUIRE(plain.size() == checkpointed.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      INFO(plain[i].first);
      REQUIRE(plain[i].second.defined() == checkpointed[i].second.defined());
      if (plain[i].second.defined())
        CHECK(max_abs_diff(plain[i].second.to(DType::Float64), checkpointed[i].second.to(DType::Float64)) < 1e-5);
    }
    CHECK(kept_checkpointed < kept_plain * 3 / 4);
  }
}
