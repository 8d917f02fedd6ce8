// Optimizer ops: argument checks, creation of missing optimizer state, dispatch to the device's
// multi-tensor kernel, and the storage version bump of every tensor written in place. The update
// formulas are in ops/optim.h; the CPU kernels in ops/cpu/optim.cpp.
#include "tessera/ops/optim.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/op_list.h"

namespace tessera {

namespace {

// In-place updates are not differentiable, so they refuse to run where autograd would expect a
// graph: grad mode on and an operand requiring grad.
template <class... Lists>
void refuse_grad(const char* op, const Lists&... lists) {
  if (!autograd::grad_enabled()) return;
  const auto one = [op](const std::vector<Tensor>& ts) {
    for (const Tensor& t : ts)
      TS_CHECK(!t.defined() || !t.requires_grad(), op, ": ", describe(t),
               " requires grad while grad mode is on; optimizer updates are in-place and not "
               "differentiable (run them inside NoGradGuard)");
  };
  (one(lists), ...);
}

// The parameters (or selves) of an op: defined, floating, contiguous, one dtype and device.
void check_targets(const char* op, const char* what, const std::vector<Tensor>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    TS_CHECK(t.defined(), op, ": ", what, "[", i, "] is an undefined tensor");
    TS_CHECK(is_floating(t.dtype()), op, ": ", what, "[", i, "] must be floating, got ", describe(t));
    TS_CHECK(t.dtype() == ts[0].dtype(), op, ": ", what, "[", i, "] is ", describe(t), " but ", what, "[0] is ",
             describe(ts[0]), " (one dtype per call)");
    TS_CHECK(t.device() == ts[0].device(), op, ": ", what, "[", i, "] is on ", t.device().str(), " but ", what,
             "[0] is on ", ts[0].device().str());
    TS_CHECK(t.is_contiguous(), op, ": ", what, "[", i, "] must be contiguous (it is written in place), got ",
             describe(t), " with strides ", t.strides());
  }
}

// A list that goes with the targets: same length, each tensor with its target's shape, dtype and
// device; `contiguous` for lists written in place.
void check_companion(const char* op, const char* what, const std::vector<Tensor>& ts,
                     const std::vector<Tensor>& targets, bool contiguous) {
  TS_CHECK(ts.size() == targets.size(), op, ": got ", ts.size(), " ", what, " for ", targets.size(), " tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    TS_CHECK(t.defined(), op, ": ", what, "[", i, "] is an undefined tensor");
    TS_CHECK(t.shape() == targets[i].shape(), op, ": ", what, "[", i, "] has shape ", t.shape(),
             " but its parameter has shape ", targets[i].shape());
    TS_CHECK(t.dtype() == targets[i].dtype(), op, ": ", what, "[", i, "] is ", describe(t), " but its parameter is ",
             describe(targets[i]));
    TS_CHECK(t.device() == targets[i].device(), op, ": ", what, "[", i, "] is on ", t.device().str(),
             " but its parameter is on ", targets[i].device().str());
    TS_CHECK(!contiguous || t.is_contiguous(), op, ": ", what, "[", i,
             "] must be contiguous (it is written in place), got strides ", t.strides());
  }
}

// The tensors written in place must not share memory: a parameter listed twice, or used as its
// own state, would be updated twice (and raced on by two threads).
void check_disjoint(const char* op, const std::vector<std::pair<const char*, const std::vector<Tensor>*>>& lists) {
  struct Range {
    const Storage* storage;
    int64_t begin, end;
    const char* list;
    size_t index;
  };
  std::vector<Range> ranges;
  for (const auto& [name, list] : lists)
    for (size_t i = 0; i < list->size(); ++i) {
      const Tensor& t = (*list)[i];
      if (t.numel() > 0) ranges.push_back({t.impl().storage.get(), t.offset(), t.offset() + t.numel(), name, i});
    }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.storage != b.storage ? std::less<const Storage*>()(a.storage, b.storage) : a.begin < b.begin;
  });
  for (size_t k = 1; k < ranges.size(); ++k) {
    const Range &a = ranges[k - 1], &b = ranges[k];
    TS_CHECK(a.storage != b.storage || a.end <= b.begin, op, ": ", a.list, "[", a.index, "] and ", b.list, "[", b.index,
             "] share memory; every tensor updated in place must be distinct");
  }
}

std::vector<Tensor> contiguous_all(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.detach().contiguous());
  return out;
}

// Every tensor written in place gets a new storage version (autograd's in-place detection).
template <class... Lists>
void bump(const Lists&... lists) {
  const auto one = [](const std::vector<Tensor>& ts) {
    for (const Tensor& t : ts) t.impl().storage->bump_version();
  };
  (one(lists), ...);
}

// Creates the undefined entries of an optimizer-state list (allowed on the first step only).
template <class Make>
void create_missing_state(const char* op, const char* what, std::vector<Tensor>& state,
                          const std::vector<Tensor>& params, bool first_step, const Make& make) {
  if (state.empty() && first_step) state.resize(params.size());
  if (state.size() != params.size()) return;  // check_companion reports it
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].defined()) continue;
    TS_CHECK(first_step, op, ": ", what, "[", i, "] is undefined after the first step (the state of ",
             describe(params[i]), " was lost)");
    state[i] = make(params[i]);
  }
}

void check_nonnegative(const char* op, const char* what, double v) {
  TS_CHECK(std::isfinite(v) && v >= 0.0, op, ": ", what, " must be finite and >= 0, got ", v);
}

void check_adam_config(const char* op, const AdamConfig& c, int64_t step) {
  check_nonnegative(op, "lr", c.lr);
  check_nonnegative(op, "eps", c.eps);
  check_nonnegative(op, "weight_decay", c.weight_decay);
  TS_CHECK(c.beta1 >= 0.0 && c.beta1 < 1.0, op, ": beta1 must be in [0, 1), got ", c.beta1);
  TS_CHECK(c.beta2 >= 0.0 && c.beta2 < 1.0, op, ": beta2 must be in [0, 1), got ", c.beta2);
  TS_CHECK(step >= 1, op, ": step must be >= 1 (the first update is step 1), got ", step);
}

void check_sgd_config(const char* op, const SgdConfig& c) {
  check_nonnegative(op, "lr", c.lr);
  check_nonnegative(op, "momentum", c.momentum);
  check_nonnegative(op, "weight_decay", c.weight_decay);
  TS_CHECK(std::isfinite(c.dampening), op, ": dampening must be finite, got ", c.dampening);
  TS_CHECK(!c.nesterov || (c.momentum > 0.0 && c.dampening == 0.0), op,
           ": Nesterov momentum requires momentum > 0 and dampening = 0, got momentum ", c.momentum, " and dampening ",
           c.dampening);
}

}  // namespace

void adamw_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& exp_avgs,
                   std::vector<Tensor>& exp_avg_sqs, const AdamConfig& config, int64_t step, const AdamFusion& fusion) {
  const char* op = op_name(OpId::adamw_update_);
  check_adam_config(op, config, step);
  check_targets(op, "params", params);
  const auto zeros_for = [](const Tensor& p) { return zeros_like(p); };
  create_missing_state(op, "exp_avgs", exp_avgs, params, step == 1, zeros_for);
  create_missing_state(op, "exp_avg_sqs", exp_avg_sqs, params, step == 1, zeros_for);
  check_companion(op, "grads", grads, params, false);
  check_companion(op, "exp_avgs", exp_avgs, params, true);
  check_companion(op, "exp_avg_sqs", exp_avg_sqs, params, true);
  const std::vector<Tensor>& emas = fusion.emas;
  if (!emas.empty()) {
    check_companion(op, "emas", emas, params, true);
    TS_CHECK(std::isfinite(fusion.ema_weight), op, ": ema_weight must be finite, got ", fusion.ema_weight);
  }
  refuse_grad(op, params, grads, exp_avgs, exp_avg_sqs, emas);
  check_disjoint(op, {{"params", &params}, {"exp_avgs", &exp_avgs}, {"exp_avg_sqs", &exp_avg_sqs}, {"emas", &emas}});
  if (params.empty()) return;
  AdamFusion kernel_fusion = fusion;
  if (fusion.grad_scale.defined()) {
    const Tensor& f = fusion.grad_scale;
    TS_CHECK(f.numel() == 1, op, ": expected a one-element grad_scale, got ", describe(f));
    TS_CHECK(f.device() == params[0].device(), op, ": grad_scale is on ", f.device().str(),
             " but the parameters are on ", params[0].device().str());
    kernel_fusion.grad_scale = f.detach().reshape({}).to(DType::Float64).contiguous();
  }
  if (const Tensor& v = fusion.step_values; v.defined())
    TS_CHECK(v.dtype() == DType::Float64 && v.numel() == 3 && v.is_contiguous() && v.device() == params[0].device(), op,
             ": step_values must be 3 contiguous float64 values (lr, step, ema_weight) on ", params[0].device().str(),
             ", got ", describe(v));
  adam_kernel[params[0].device()](config, step, params, contiguous_all(grads), exp_avgs, exp_avg_sqs, kernel_fusion);
  bump(params, exp_avgs, exp_avg_sqs, emas);
}

void adamw_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                   double beta2, double eps, double weight_decay, int64_t step, bool decoupled_weight_decay) {
  std::vector<Tensor> m{exp_avg}, v{exp_avg_sq};
  adamw_update_({param}, {grad}, m, v, AdamConfig{lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay}, step);
  exp_avg = m[0];
  exp_avg_sq = v[0];
}

void sgd_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 std::vector<Tensor>& momentum_bufs, const SgdConfig& config, bool first_step) {
  const char* op = op_name(OpId::sgd_update_);
  check_sgd_config(op, config);
  check_targets(op, "params", params);
  check_companion(op, "grads", grads, params, false);
  const bool has_momentum = config.momentum != 0.0;
  if (has_momentum) {
    create_missing_state(op, "momentum_bufs", momentum_bufs, params, first_step,
                         [](const Tensor& p) { return empty_like(p); });
    check_companion(op, "momentum_bufs", momentum_bufs, params, true);
  }
  const std::vector<Tensor> no_bufs;
  const std::vector<Tensor>& bufs = has_momentum ? momentum_bufs : no_bufs;
  refuse_grad(op, params, grads, bufs);
  check_disjoint(op, {{"params", &params}, {"momentum_bufs", &bufs}});
  if (params.empty()) return;
  sgd_kernel[params[0].device()](config, first_step, params, contiguous_all(grads), bufs);
  bump(params, bufs);
}

void sgd_update_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum, double dampening,
                 double weight_decay, bool nesterov, bool first_step) {
  std::vector<Tensor> bufs{momentum_buf};
  sgd_update_({param}, {grad}, bufs, SgdConfig{lr, momentum, dampening, weight_decay, nesterov}, first_step);
  momentum_buf = bufs[0];
}

Tensor sum_of_squares(const std::vector<Tensor>& tensors) {
  const char* op = op_name(OpId::sum_of_squares);
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].defined(), op, ": tensors[", i, "] is an undefined tensor");
    TS_CHECK(tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(), op, ": tensors[",
             i, "] is ", describe(tensors[i]), " but tensors[0] is ", describe(tensors[0]),
             " (one dtype and device per call)");
  }
  refuse_grad(op, tensors);
  if (tensors.empty()) return zeros({}, DType::Float64);
  TS_CHECK(is_floating(tensors[0].dtype()), op, ": expected floating tensors, got ", describe(tensors[0]));
  Tensor out = Tensor::empty({}, DType::Float64, tensors[0].device());
  sum_squares_kernel[out.device()](contiguous_all(tensors), out);
  return out;
}

void scale_(const std::vector<Tensor>& tensors, const Tensor& factor) {
  const char* op = op_name(OpId::scale_);
  check_targets(op, "tensors", tensors);
  refuse_grad(op, tensors);
  check_disjoint(op, {{"tensors", &tensors}});
  if (tensors.empty()) return;
  TS_CHECK(factor.defined() && factor.numel() == 1, op, ": expected a one-element factor, got ", describe(factor));
  TS_CHECK(factor.device() == tensors[0].device(), op, ": the factor is on ", factor.device().str(),
           " but the tensors are on ", tensors[0].device().str());
  scale_kernel[tensors[0].device()](tensors, factor.detach().reshape({}).to(DType::Float64).contiguous());
  bump(tensors);
}

void scale_(const std::vector<Tensor>& tensors, double factor) {
  const Device device = tensors.empty() ? Device::cpu() : tensors[0].device();
  scale_(tensors, full({}, factor, DType::Float64, device));
}

Tensor unscale_(const std::vector<Tensor>& grads, const Tensor& inv_scale) {
  const char* op = op_name(OpId::unscale_);
  check_targets(op, "grads", grads);
  refuse_grad(op, grads);
  check_disjoint(op, {{"grads", &grads}});
  const Device device = grads.empty() ? Device::cpu() : grads[0].device();
  Tensor found = zeros({}, DType::Float64, device);
  if (grads.empty()) return found;
  TS_CHECK(inv_scale.defined() && inv_scale.numel() == 1 && inv_scale.device() == device, op,
           ": expected a one-element inverse scale on ", device.str(), ", got ", describe(inv_scale));
  unscale_kernel[device](grads, inv_scale.detach().reshape({}).to(DType::Float64).contiguous(), found);
  bump(grads);
  return found;
}

void lerp_(const std::vector<Tensor>& selves, const std::vector<Tensor>& ends, double weight) {
  const char* op = op_name(OpId::lerp_);
  TS_CHECK(std::isfinite(weight), op, ": weight must be finite, got ", weight);
  check_targets(op, "selves", selves);
  TS_CHECK(ends.size() == selves.size(), op, ": got ", ends.size(), " ends for ", selves.size(), " tensors");
  std::vector<Tensor> converted;
  converted.reserve(ends.size());
  for (size_t i = 0; i < ends.size(); ++i) {
    TS_CHECK(ends[i].defined(), op, ": ends[", i, "] is an undefined tensor");
    TS_CHECK(is_floating(ends[i].dtype()), op, ": ends[", i, "] must be floating, got ", describe(ends[i]));
    converted.push_back(ends[i].detach().to(selves[i].dtype()).contiguous());
  }
  check_companion(op, "ends", converted, selves, false);
  refuse_grad(op, selves, ends);
  check_disjoint(op, {{"selves", &selves}});
  if (selves.empty()) return;
  lerp_kernel[selves[0].device()](selves, converted, weight);
  bump(selves);
}

}  // namespace tessera
