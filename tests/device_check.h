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
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/autocast.h"
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
  REQUIRE_FALSE(host_inputs.empty());
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

// The half-precision variant (tests/cuda/test_low_precision.cpp for cuda, tests/test_cpu_bf16*.cpp
// for the CPU's bfloat16): on every device of `devices` (the CPU among them), under
// autocast with low-precision activations (core/autocast.h), `op` runs with its float32 inputs in
// `low` — except `parameters`, which stay float32 as a model's master weights do — against the CPU
// in float32 on the same values (those inputs rounded to `low`), forward and backward with one
// upstream gradient (rounded likewise). Results are compared in float32: within `low`'s rounding
// of the largest value (a few roundings of the output and of intermediate sums), exactly for
// integer and bool results. A floating result must be in `low` (the bytes halve only if every op
// keeps them low), or in float32 where `accumulate_result` says so.
struct LowPrecisionCheck {
  DType low = DType::BFloat16;
  std::vector<size_t> parameters = {};
  bool accumulate_result = false;
  // The reference: float32 on the CPU on the same rounded values (false), or the same autocast on
  // the CPU (true: cuda's bfloat16 kernels against the CPU's, which compute the same formulas).
  bool reference_in_low = false;
};

inline DeviceCheckOptions low_precision_tolerance(DType low, DeviceCheckOptions opt) {
  opt.rtol = std::max(opt.rtol, low == DType::BFloat16 ? 3e-2 : 4e-3);
  opt.atol = std::max(opt.atol, low == DType::BFloat16 ? 1e-2 : 1e-3);
  opt.relative_to_max = true;
  return opt;
}

// compare_values of a half-precision result (converted to the CPU's dtype) with the CPU's, where
// a CPU value beyond `low`'s range must come out as inf or NaN (reported, never a wrong finite
// number) and is not compared otherwise.
inline std::string compare_in_range(const Tensor& got, const Tensor& want, DType low, const DeviceCheckOptions& opt) {
  if (!is_floating(want.dtype()) || got.shape() != want.shape()) return compare_values(got, want, opt);
  const double limit = low == DType::Float16 ? 65504.0 : 3.389e38;
  std::vector<double> g = got.to(want.dtype()).to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (std::isfinite(w[i]) && std::abs(w[i]) > limit) {
      if (std::isfinite(g[i]))
        return detail::concat("element ", i, ": ", g[i], " where the CPU's ", w[i], " is beyond ", dtype_name(low),
                              "'s range");
      g[i] = w[i] = 0;
    }
  return compare_values(from_vector(g, want.shape()).to(want.dtype()), from_vector(w, want.shape()).to(want.dtype()),
                        opt);
}

inline void check_low_precision_on_devices(const std::string& name, const Inputs& host_inputs, const OpFn& op,
                                           const LowPrecisionCheck& check, DeviceCheckOptions opt,
                                           const std::vector<Device>& devices) {
  REQUIRE_FALSE(devices.empty());
  const DType low = check.low;
  const auto is_parameter = [&](size_t i) {
    return std::find(check.parameters.begin(), check.parameters.end(), i) != check.parameters.end();
  };
  Inputs rounded, lowered;  // the CPU's float32 values, and the same values as the device gets them
  for (size_t i = 0; i < host_inputs.size(); ++i) {
    const Tensor& x = host_inputs[i];
    const bool activation = x.dtype() == DType::Float32 && !is_parameter(i);
    rounded.push_back(activation ? x.to(low).to(DType::Float32) : x);
    lowered.push_back(activation ? x.to(low) : x);
  }
  opt = low_precision_tolerance(low, opt);
  for (bool strided : {false, true}) {
    if (strided && !opt.noncontiguous) continue;
    Layout cpu = make_layout(check.reference_in_low ? lowered : rounded, Device::cpu(), strided, opt);
    RunResult want;
    {
      std::optional<AutocastGuard> autocast;
      if (check.reference_in_low) autocast.emplace(DeviceType::CPU, low);
      want.output = op(cpu.operands);
    }
    Tensor upstream;
    if (opt.backward && is_floating(want.output.dtype()) && want.output.requires_grad()) {
      Generator gen(4321);
      upstream = randn(want.output.shape(), DType::Float32, &gen).to(low).to(want.output.dtype());
    }
    backward_into(want, cpu, upstream);
    for (const Device& device : devices) {
      INFO(name << " in " << dtype_name(low) << " on " << device.str()
                << (strided ? ", strided inputs" : ", contiguous inputs"));
      Layout dev = make_layout(lowered, device, strided, opt);
      RunResult got;
      {
        AutocastGuard autocast(device.type, low);
        got.output = op(dev.operands);
      }
      if (check.reference_in_low) {
        CHECK(got.output.dtype() == want.output.dtype());
      } else if (want.output.dtype() == DType::Float32) {
        const DType expected = check.accumulate_result ? accumulate_dtype(low) : low;
        INFO("the result is " << dtype_name(got.output.dtype()) << ", expected " << dtype_name(expected));
        CHECK(got.output.dtype() == expected);
      }
      const std::string out_diff = compare_in_range(got.output, want.output, low, opt);
      INFO("output: " << out_diff);
      CHECK(out_diff.empty());
      if (upstream.defined() && got.output.requires_grad()) {
        got.output.backward(upstream.to(device).to(got.output.dtype()));
        for (const Tensor& leaf : dev.leaves) got.grads.push_back(leaf.requires_grad() ? leaf.grad() : Tensor());
      }
      REQUIRE(got.grads.size() == want.grads.size());
      for (size_t i = 0; i < want.grads.size(); ++i) {
        if (!want.grads[i].defined()) continue;
        INFO("gradient of input " << i);
        REQUIRE(got.grads[i].defined());
        CHECK(got.grads[i].dtype() == dev.leaves[i].dtype());
        const std::string grad_diff = compare_in_range(got.grads[i].to(want.grads[i].dtype()), want.grads[i], low, opt);
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
  REQUIRE_FALSE(host_tensors.empty());  // nothing to update would compare nothing
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
