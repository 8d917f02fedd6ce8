// The one mechanism by which every op is tested on every device: an op is run on the CPU (the
// reference, itself proven by the float64 gradient checks of tests/test_*.cpp) and on every other
// available device, forward and backward with the same upstream gradient, and the outputs and
// input gradients are compared — once with contiguous inputs and once with every input a strided
// view (each input interleaved with junk along a new last dim and selected back, so its last dim
// has stride 2 and the gradient must not leak into the junk).
//
//   check_on_devices("softmax", {randu({4, 7})}, [](const Inputs& in) { return softmax(in[0], -1); });
//
// float32 results must agree within 1e-5 relative (plus a small absolute floor for values near
// zero); integer and bool results exactly.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/backend.h"
#include "tessera/ops/ops.h"

namespace tessera::testing {

using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Inputs&)>;

struct DeviceCheckOptions {
  double rtol = 1e-5;
  double atol = 1e-6;
  bool backward = true;              // compare input gradients too (when the output is floating)
  bool noncontiguous = true;         // also run with strided views of the inputs
  std::vector<size_t> no_grad = {};  // floating inputs that must not require grad (e.g. targets)
  // Measure the relative tolerance against the largest magnitude in the tensor instead of each
  // element's own: for whole models, where an element near zero is the sum of large terms that
  // cancel, and float32 rounding of those terms (about 1e-7 of their size) is all its error.
  bool relative_to_max = false;
};

// The devices other than the CPU that the tests run on: every visible CUDA device (at most two).
inline std::vector<Device> test_devices() {
  std::vector<Device> out;
  const int n = std::min(device_count(DeviceType::CUDA), 2);
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

// Uniform float32 in [lo, hi), reproducible by seed.
inline Tensor randu(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 7) {
  Generator gen(seed);
  return rand(shape, DType::Float32, &gen) * (hi - lo) + lo;
}

// First element where got and want differ beyond tolerance, described; "" if none.
inline std::string compare_values(const Tensor& got, const Tensor& want, const DeviceCheckOptions& opt) {
  if (got.shape() != want.shape()) return detail::concat("shape ", got.shape(), " vs the CPU's ", want.shape());
  if (got.dtype() != want.dtype())
    return detail::concat("dtype ", dtype_name(got.dtype()), " vs the CPU's ", dtype_name(want.dtype()));
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  const bool exact = !is_floating(want.dtype());
  double scale = 0;
  if (opt.relative_to_max)
    for (double v : w) scale = std::isfinite(v) ? std::max(scale, std::abs(v)) : scale;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tolerance = opt.atol + opt.rtol * (opt.relative_to_max ? scale : std::abs(w[i]));
    const bool same = std::isnan(w[i]) ? std::isnan(g[i]) : exact ? g[i] == w[i] : std::abs(g[i] - w[i]) <= tolerance;
    if (!same) return detail::concat("element ", i, ": ", g[i], " vs the CPU's ", w[i]);
  }
  return "";
}

// The inputs as one layout presents them to the op: the leaves, and the operands made from them.
struct Layout {
  Inputs leaves, operands;
};

inline Layout make_layout(const Inputs& host_inputs, Device device, bool strided, const DeviceCheckOptions& opt) {
  Layout l;
  for (size_t i = 0; i < host_inputs.size(); ++i) {
    const Tensor& x = host_inputs[i];
    Tensor base = x;
    if (strided) base = stack({x, full_like(x, 0.25)}, -1);  // junk beside every element
    Tensor leaf = base.to(device).detach().clone();
    const bool wants_grad = opt.backward && is_floating(x.dtype()) &&
                            std::find(opt.no_grad.begin(), opt.no_grad.end(), i) == opt.no_grad.end();
    if (wants_grad) leaf.set_requires_grad(true);
    l.leaves.push_back(leaf);
    l.operands.push_back(strided ? leaf.select(-1, 0) : leaf);
  }
  return l;
}

struct RunResult {
  Tensor output;
  std::vector<Tensor> grads;  // per leaf (undefined where none)
};

// Back-propagates `upstream` (a host tensor) from r.output and collects the leaves' gradients.
inline void backward_into(RunResult& r, const Layout& l, const Tensor& upstream) {
  if (!upstream.defined() || !r.output.requires_grad()) return;
  r.output.backward(upstream.to(r.output.device()));
  for (const Tensor& leaf : l.leaves) r.grads.push_back(leaf.requires_grad() ? leaf.grad() : Tensor());
}

// Runs `op` on the CPU and on every test device, contiguous and strided, and CHECKs that they agree.
inline void check_on_devices(const std::string& name, const Inputs& host_inputs, const OpFn& op,
                             DeviceCheckOptions opt = {}) {
  const std::vector<Device> devices = test_devices();
  REQUIRE_FALSE(devices.empty());  // the cuda tests' main() skips the whole executable otherwise
  for (bool strided : {false, true}) {
    if (strided && !opt.noncontiguous) continue;
    Layout cpu = make_layout(host_inputs, Device::cpu(), strided, opt);
    RunResult want{op(cpu.operands), {}};
    Tensor upstream;
    if (opt.backward && is_floating(want.output.dtype()) && want.output.requires_grad()) {
      Generator gen(4321);
      upstream = randn(want.output.shape(), want.output.dtype(), &gen);
    }
    backward_into(want, cpu, upstream);
    for (const Device& device : devices) {
      INFO(name << " on " << device.str() << (strided ? ", strided inputs" : ", contiguous inputs"));
      Layout dev = make_layout(host_inputs, device, strided, opt);
      RunResult got{op(dev.operands), {}};
      CHECK(got.output.device() == device);
      const std::string out_diff = compare_values(got.output, want.output, opt);
      INFO("output: " << out_diff);
      CHECK(out_diff.empty());
      backward_into(got, dev, upstream);
      REQUIRE(got.grads.size() == want.grads.size());
      for (size_t i = 0; i < want.grads.size(); ++i) {
        if (!want.grads[i].defined()) continue;
        INFO("gradient of input " << i);
        REQUIRE(got.grads[i].defined());
        CHECK(got.grads[i].device() == device);
        const std::string grad_diff = compare_values(got.grads[i], want.grads[i], opt);
        INFO(grad_diff);
        CHECK(grad_diff.empty());
      }
    }
  }
}

// For in-place updates (optimizer steps): `update` mutates the tensors it is given; it is run on
// CPU copies and on device copies of `host_tensors`, and every tensor is compared afterwards.
inline void check_update_on_devices(const std::string& name, const Inputs& host_tensors,
                                    const std::function<void(Inputs&)>& update, DeviceCheckOptions opt = {}) {
  const std::vector<Device> devices = test_devices();
  REQUIRE_FALSE(devices.empty());
  Inputs cpu;
  for (const Tensor& t : host_tensors) cpu.push_back(t.clone());
  update(cpu);
  for (const Device& device : devices) {
    INFO(name << " on " << device.str());
    Inputs dev;
    for (const Tensor& t : host_tensors) dev.push_back(t.to(device).clone());
    update(dev);
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO("tensor " << i);
      CHECK(dev[i].device() == device);
      const std::string diff = compare_values(dev[i], cpu[i], opt);
      INFO(diff);
      CHECK(diff.empty());
    }
  }
}

}  // namespace tessera::testing
