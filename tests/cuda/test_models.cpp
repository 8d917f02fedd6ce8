// Every family's model and three hybrids of model files (tests/hybrid_models.h) on device cuda
// against the same model on the CPU: forward in training and eval mode, every parameter's gradient,
// and AdamW steps. Models are built on the CPU from one seed and moved, so both sides start from the
// same weights. Reduced depths and 32x32 images keep the emulated runs short.
#include <catch2/catch.hpp>

#include <sstream>

#include "tessera/models/registry.h"
#include "tessera/ops/ops.h"
#include "tests/bf16_training_check.h"
#include "tests/device_check.h"
#include "tests/model_variants.h"
#include "tests/sanitized.h"
#include "tessera/train/optimizer.h"

using namespace tessera;
using testing::build_variant;
using testing::compare_values;
using testing::DeviceCheckOptions;
using testing::model_variants;
using testing::ModelVariant;
using testing::randu;

namespace {

// Within 1e-5 of each tensor's largest magnitude: through a model, an element near zero is often
// the sum of large terms that cancel (a class token's gradient), and the two devices sum them in
// different orders.
DeviceCheckOptions model_tolerance() {
  DeviceCheckOptions opt;
  opt.rtol = 1e-5;
  opt.atol = 1e-7;
  opt.relative_to_max = true;
  return opt;
}

void check_parameters(models::Model& cpu, models::Model& dev, bool gradients) {
  const auto a = cpu.named_parameters(), b = dev.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first << (gradients ? " (gradient)" : ""));
    const Tensor& want = gradients ? a[i].second.grad() : a[i].second;
    const Tensor& got = gradients ? b[i].second.grad() : b[i].second;
    REQUIRE(want.defined() == got.defined());
    if (!want.defined()) continue;
    CHECK(got.device() == dev.device());
    const std::string diff = compare_values(got, want, model_tolerance());
    INFO(diff);
    CHECK(diff.empty());
  }
}

}  // namespace

TEST_CASE("every family and hybrid runs forward and backward on cuda as on the CPU", "[cuda][models]") {
  const Device dev = testing::test_devices().front();
  const Tensor images = randu({2, 3, 32, 32}, -1, 1, 5);
  const Tensor labels = from_vector(std::vector<int64_t>{3, 7}, {2});
  for (const ModelVariant& v : model_variants()) {
    INFO(v.name);
    auto cpu = build_variant(v, Device::cpu()), gpu = build_variant(v, dev);
    check_parameters(*cpu, *gpu, false);  // the same initial weights
    for (bool training : {true, false}) {
      INFO((training ? "train mode" : "eval mode"));
      cpu->train(training);
      gpu->train(training);
      const Tensor want = cpu->forward(images), got = gpu->forward(images.to(dev));
      const std::string diff = compare_values(got, want, model_tolerance());
      INFO("logits: " << diff);
      CHECK(diff.empty());
      if (!training) continue;
      cross_entropy(want, labels, 0.1).backward();
      cross_entropy(got, labels.to(dev), 0.1).backward();
      check_parameters(*cpu, *gpu, true);
    }
  }
}

// Adam divides each gradient by its own running magnitude, so where a gradient is zero in exact
// arithmetic (a key bias under a softmax over the keys: every score shifts alike) it turns rounding
// noise of 1e-9 into steps of ±lr on either device, differently. An eps of 1e-4 keeps such noise
// negligible while every real gradient still takes Adam's normalised step; the optimizer kernels
// themselves are compared exactly in test_optim_steps.cpp.
TEST_CASE("three AdamW steps on cuda end with the CPU's weights", "[cuda][models]") {
  const Device dev = testing::test_devices().front();
  const ModelVariant v = model_variants()[0];
  auto cpu = build_variant(v, Device::cpu()), gpu = build_variant(v, dev);
  auto opt_cpu = train::create_optimizer("adamw", train::param_groups(*cpu, 0.05), 1e-3, 0.9, 1e-4);
  auto opt_gpu = train::create_optimizer("adamw", train::param_groups(*gpu, 0.05), 1e-3, 0.9, 1e-4);
  for (int step = 0; step < 3; ++step) {
    const Tensor images = randu({2, 3, 32, 32}, -1, 1, 100 + step);
    const Tensor labels = from_vector(std::vector<int64_t>{step % 10, (step * 3 + 1) % 10}, {2});
    cross_entropy(cpu->forward(images), labels).backward();
    cross_entropy(gpu->forward(images.to(dev)), labels.to(dev)).backward();
    opt_cpu->step();
    opt_gpu->step();
    opt_cpu->zero_grad();
    opt_gpu->zero_grad();
  }
  check_parameters(*cpu, *gpu, false);
}

// The hybrids of tests/test_model_file.cpp, trained on cuda: five AdamW steps on one batch end with
// the CPU's weights (eps as above), and the loss falls on both.
TEST_CASE("three hybrids train on cuda as on the CPU", "[cuda][models][hybrids]") {
  const Device dev = testing::test_devices().front();
  const Tensor images = randu({4, 3, 32, 32}, -1, 1, 11);
  const Tensor labels = from_vector(std::vector<int64_t>{1, 4, 7, 9}, {4});
  for (const ModelVariant& v : model_variants()) {
    if (!v.file) continue;
    INFO(v.name);
    auto cpu = build_variant(v, Device::cpu()), gpu = build_variant(v, dev);
    auto opt_cpu = train::create_optimizer("adamw", train::param_groups(*cpu, 0.05), 2e-3, 0.9, 1e-4);
    auto opt_gpu = train::create_optimizer("adamw", train::param_groups(*gpu, 0.05), 2e-3, 0.9, 1e-4);
    std::vector<double> cpu_losses, gpu_losses;
    for (int step = 0; step < 5; ++step) {
      Tensor want = cross_entropy(cpu->forward(images), labels),
             got = cross_entropy(gpu->forward(images.to(dev)), labels.to(dev));
      cpu_losses.push_back(want.item());
      gpu_losses.push_back(got.item());
      want.backward();
      got.backward();
      opt_cpu->step();
      opt_gpu->step();
      opt_cpu->zero_grad();
      opt_gpu->zero_grad();
    }
    check_parameters(*cpu, *gpu, false);
    std::ostringstream losses;
    for (size_t i = 0; i < cpu_losses.size(); ++i) losses << " " << cpu_losses[i] << "/" << gpu_losses[i];
    INFO("CPU/cuda losses by step:" << losses.str());
    CHECK(gpu_losses.back() < gpu_losses.front());
    CHECK(std::abs(gpu_losses.back() - cpu_losses.back()) <= 1e-4 * cpu_losses.front());
  }
}

// bfloat16 activations against float32 (tests/bf16_training_check.h), here on cuda; on the CPU
// itself in tests/test_cpu_bf16_models.cpp.
TEST_CASE("every family and hybrid trains with bfloat16 activations as with float32", "[cuda][models][amp]") {
  // Two steps under the sanitizers: the same code (autocast forward and backward, the optimizer on
  // float32 master weights); four show the losses tracking float32's as they fall.
  testing::check_bf16_training_as_float32(testing::test_devices().front(), testing::kSanitized ? 2 : 4);
}
