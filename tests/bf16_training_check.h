// bfloat16 activations (core/autocast.h, the default of --amp) against float32, through whole
// models: every variant of tests/model_variants.h runs `steps` plain SGD steps on one batch, once in
// float32 on the CPU and once under bfloat16 autocast on `device` (cuda, or the CPU itself). The
// logits must be bfloat16 (the activations really are low) and every parameter's gradient float32
// (the master weights'); logits and gradients of the first step agree to bfloat16's 8 significant
// bits compounded through the blocks (10% of each tensor's largest value), and the losses fall and
// stay within 5% of the first float32 loss at each of the first ten steps and within 2.5% of it on
// average over the run.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <vector>

#include "tessera/core/autocast.h"
#include "tessera/train/optimizer.h"
#include "tests/device_check.h"
#include "tests/model_variants.h"
#include "tests/sanitized.h"

namespace tessera::testing {

// The CPU's runs (tests/test_cpu_bf16_models.cpp, tests/test_cpu_bf16_native.cpp): fifty steps show
// the two curves together as they fall; four under the sanitizers run the same code.
inline constexpr int kCpuBf16TrainingSteps = kSanitized ? 4 : 50;

inline void check_bf16_training_as_float32(Device device, int steps) {
  const Tensor images = randu({2, 3, 32, 32}, -1, 1, 5);
  const Tensor labels = from_vector(std::vector<int64_t>{3, 7}, {2});
  DeviceCheckOptions close;
  close.rtol = 0.1;
  close.atol = 1e-5;  // gradients that are 0 in exact arithmetic (a key bias under a softmax) are rounding noise
  close.relative_to_max = true;
  for (const ModelVariant& v : model_variants()) {
    INFO(v.name << " in bfloat16 on " << device.str());
    auto f32 = build_variant(v, Device::cpu()), low = build_variant(v, device);
    // Plain SGD with a small step on one batch: a loss that falls step by step on both sides.
    auto sgd_f32 = train::create_optimizer("momentum", train::param_groups(*f32, 0.0), 0.004, 0.0);
    auto sgd_low = train::create_optimizer("momentum", train::param_groups(*low, 0.0), 0.004, 0.0);
    std::vector<double> want_losses, got_losses;
    for (int step = 0; step < steps; ++step) {
      const Tensor want = f32->forward(images);
      Tensor got;
      {
        AutocastGuard autocast(device.type, DType::BFloat16);
        got = low->forward(images.to(device));
      }
      const Tensor want_loss = cross_entropy(want, labels), got_loss = cross_entropy(got, labels.to(device));
      want_losses.push_back(want_loss.item());
      got_losses.push_back(got_loss.item());
      want_loss.backward();
      got_loss.backward();
      if (step == 0) {
        CHECK(got.dtype() == DType::BFloat16);
        const std::string diff = compare_values(got.to(DType::Float32).to(Device::cpu()), want, close);
        INFO("logits: " << diff);
        CHECK(diff.empty());
        const auto a = f32->named_parameters(), b = low->named_parameters();
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); ++i) {
          INFO(a[i].first << " (gradient)");
          REQUIRE(b[i].second.grad().defined());
          CHECK(b[i].second.grad().dtype() == DType::Float32);
          const std::string grad_diff = compare_values(b[i].second.grad().to(Device::cpu()), a[i].second.grad(), close);
          INFO(grad_diff);
          CHECK(grad_diff.empty());
        }
      }
      sgd_f32->step();
      sgd_low->step();
      sgd_f32->zero_grad();
      sgd_low->zero_grad();
    }
    std::ostringstream losses;
    for (size_t i = 0; i < want_losses.size(); ++i) losses << " " << want_losses[i] << "/" << got_losses[i];
    INFO("float32/bfloat16 losses by step:" << losses.str());
    // Step by step for the first ten steps; over a longer run a loss spike (the talking-heads hybrid
    // has them at this step size, in float32 as in bfloat16) comes a step earlier or later on either
    // side, so beyond them the curves are held together on average.
    double total = 0;
    for (size_t i = 0; i < want_losses.size(); ++i) {
      const double gap = std::abs(got_losses[i] - want_losses[i]);
      if (i < 10) CHECK(gap <= 0.05 * want_losses[0]);
      total += gap;
    }
    CHECK(total / static_cast<double>(want_losses.size()) <= 0.025 * want_losses[0]);
    CHECK(got_losses.back() < got_losses.front());
  }
}

}  // namespace tessera::testing
