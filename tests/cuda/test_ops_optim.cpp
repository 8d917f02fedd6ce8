// The multi-tensor optimizer updates on device cuda against the CPU (check_update_on_devices):
// every tensor of a list is updated in one launch, with the CPU's arithmetic.
#include <catch2/catch.hpp>

#include "ops/ops.h"
#include "ops/optim.h"
#include "tests/device_check.h"
#include "train/optimizer.h"

using namespace tessera;
using testing::check_update_on_devices;
using testing::Inputs;
using testing::randu;

namespace {
// Parameter-like tensors of very different sizes: a scalar, a bias, a matrix, a big one.
Inputs params(uint64_t seed) {
  return {randu({1}, -1, 1, seed), randu({7}, -1, 1, seed + 1), randu({33, 20}, -1, 1, seed + 2),
          randu({150000}, -1, 1, seed + 3)};
}
std::vector<Tensor> slice(Inputs& t, size_t begin, size_t n) {
  return std::vector<Tensor>(t.begin() + static_cast<long>(begin), t.begin() + static_cast<long>(begin + n));
}
}  // namespace

TEST_CASE("adamw and adam steps on cuda", "[cuda][optim]") {
  Inputs all = params(1);
  for (const Tensor& g : params(10)) all.push_back(g);
  for (bool decoupled : {true, false}) {
    check_update_on_devices(decoupled ? "adamw" : "adam with L2", all, [decoupled](Inputs& t) {
      std::vector<Tensor> p = slice(t, 0, 4), g = slice(t, 4, 4), m, v;
      const AdamConfig c{1e-2, 0.9, 0.999, 1e-8, 0.05, decoupled};
      for (int64_t step = 1; step <= 3; ++step) adamw_update_(p, g, m, v, c, step);
    });
  }
}

TEST_CASE("sgd steps with momentum, dampening and nesterov on cuda", "[cuda][optim]") {
  Inputs all = params(2);
  for (const Tensor& g : params(20)) all.push_back(g);
  for (const SgdConfig& c : {SgdConfig{0.1, 0.0, 0.0, 1e-4, false}, SgdConfig{0.1, 0.9, 0.1, 0.0, false},
                             SgdConfig{0.05, 0.9, 0.0, 1e-3, true}}) {
    check_update_on_devices("sgd", all, [c](Inputs& t) {
      std::vector<Tensor> p = slice(t, 0, 4), g = slice(t, 4, 4), bufs;
      for (int step = 0; step < 3; ++step) sgd_update_(p, g, bufs, c, step == 0);
    });
  }
}

TEST_CASE("sum_of_squares, scale_, lerp_ and clip_grad_norm on cuda", "[cuda][optim]") {
  Inputs t = params(3);
  const double want = sum_of_squares(t).item();
  std::vector<Tensor> on_device;
  for (const Tensor& x : t) on_device.push_back(x.to(Device::cuda()));
  const Tensor got = sum_of_squares(on_device);
  CHECK(got.device() == Device::cuda());
  CHECK(got.item() == Approx(want).epsilon(1e-12));
  check_update_on_devices("scale_ by a device factor", t, [](Inputs& x) {
    scale_(x, full({}, 0.37, DType::Float64, x[0].device()));
  });
  Inputs pairs = params(4);
  for (const Tensor& e : params(40)) pairs.push_back(e);
  for (double w : {0.1, 0.9})
    check_update_on_devices("lerp_", pairs, [w](Inputs& x) { lerp_(slice(x, 0, 4), slice(x, 4, 4), w); });
  check_update_on_devices("clip_grad_norm", params(5), [](Inputs& x) {
    std::vector<Tensor> leaves;
    for (Tensor& p : x) {
      Tensor leaf = p.detach().clone().set_requires_grad(true);
      leaf.set_grad(p * 3.0);
      leaves.push_back(leaf);
    }
    train::clip_grad_norm(leaves, 1.0);
    for (size_t i = 0; i < x.size(); ++i) x[i] = leaves[i].grad();
  });
}
