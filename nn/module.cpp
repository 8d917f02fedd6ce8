#include "tessera/nn/module.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tessera/autograd/node.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

std::string LoadReport::str() const {
  std::ostringstream os;
  auto list = [&](const char* what, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    os << "\n  " << keys.size() << ' ' << what << ':';
    for (const std::string& k : keys) os << "\n    " << k;
  };
  list("missing keys (in the model, not in the file)", missing);
  list("unexpected keys (in the file, not in the model)", unexpected);
  list("shape mismatches", mismatched);
  return os.str();
}

Tensor Module::forward(const Tensor&) {
  throw Error(type_name() + ": this module has no single-tensor forward(); call its own forward overload");
}

void Module::check_new_name(const std::string& name) const {
  TS_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": invalid member name '", name,
           "' (non-empty, no dots)");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  TS_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name(), ": name '", name,
           "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name);
  TS_CHECK(value.defined(), type_name(), ": parameter '", name, "' is undefined");
  value.set_requires_grad(true);
  params_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  TS_CHECK(value.defined(), type_name(), ": buffer '", name, "' is undefined");
  buffers_.emplace_back(name, value);
  return value;
}

Tensor Module::replace_parameter(const std::string& name, Tensor value) {
  for (auto& [n, t] : params_)
    if (n == name) {
      value.set_requires_grad(true);
      t = value;
      return value;
    }
  throw Error(type_name() + ": no parameter named '" + name + "' to replace");
}

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const {
  if (params)
    for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", params, buffers, out);
}

static bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

static NamedTensors unique_tensors(NamedTensors all) {
  std::unordered_set<const TensorImpl*> seen;
  NamedTensors out;
  for (auto& e : all)
    if (seen.insert(e.second.impl_ptr().get()).second) out.push_back(std::move(e));
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors all;
  collect("", true, false, all);
  return unique_tensors(std::move(all));
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors all;
  collect("", false, true, all);
  return unique_tensors(std::move(all));
}

NamedTensors Module::state_dict() const {
  NamedTensors all;
  collect("", true, true, all);
  return all;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

LoadReport Module::load_state_dict(const NamedTensors& state, bool strict) {
  LoadReport report;
  std::map<std::string, const Tensor*> given;
  for (const auto& [k, t] : state) {
    TS_CHECK(given.emplace(k, &t).second, "load_state_dict: key '", k, "' appears twice");
  }
  // Group the model's paths by tensor, so aliases are satisfied by any one of their paths.
  NamedTensors targets = state_dict();
  std::unordered_map<const TensorImpl*, std::vector<std::string>> paths_of;
  std::set<std::string> known;
  for (const auto& [k, t] : targets) {
    paths_of[t.impl_ptr().get()].push_back(k);
    known.insert(k);
  }
  for (const auto& [k, t] : given)
    if (!known.count(k)) report.unexpected.push_back(k);

  NoGradGuard no_grad;
  std::unordered_set<const TensorImpl*> done;
  for (const auto& [k, target] : targets) {
    const TensorImpl* id = target.impl_ptr().get();
    if (!done.insert(id).second) continue;
    const Tensor* source = nullptr;
    std::string source_key;
    for (const std::string& path : paths_of[id]) {
      auto it = given.find(path);
      if (it == given.end()) continue;
      if (it->second->shape() != target.shape()) {
        report.mismatched.push_back(detail::concat(path, ": file ", it->second->shape(), " vs model ", target.shape()));
        continue;
      }
      if (source) {
        TS_CHECK(same_values(*source, *it->second), "load_state_dict: alias keys '", source_key, "' and '", path,
                 "' name one shared tensor but hold different values");
      } else {
        source = it->second;
        source_key = path;
      }
    }
    if (!source) {
      bool any_given = false;
      for (const std::string& path : paths_of[id]) any_given = any_given || given.count(path);
      if (!any_given) report.missing.push_back(k);
      continue;
    }
    Tensor t = target;  // handle copy; writes go to the shared storage
    t.copy_(source->to(target.device()).to(target.dtype()));
  }
  if (strict && !report.ok()) throw Error("load_state_dict: the weights do not fit the model:" + report.str());
  return report;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, child] : children_) child->train(on);
}

namespace {
// Makes `t` hold `converted`'s data (same shape) while keeping its identity: every handle to t,
// and every alias path of it, sees the new data. Its gradient no longer fits and is dropped.
void replace_data(const Tensor& t, const Tensor& converted) {
  TensorImpl& impl = t.impl();
  impl.storage = converted.impl().storage;
  impl.strides = converted.strides();
  impl.offset = converted.offset();
  impl.dtype = converted.dtype();
  t.set_grad(Tensor());
}
}  // namespace

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (auto& [name, t] : state_dict())
    if (is_floating(t.dtype()) && t.dtype() != dtype)  // int64 counters stay
      replace_data(t, t.to(dtype).contiguous());
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [name, t] : state_dict())
    if (t.device() != device) replace_data(t, t.to(device).contiguous());  // an alias moves once
}

Device Module::device() const {
  const NamedTensors state = state_dict();
  return state.empty() ? Device::cpu() : state.front().second.device();
}

constinit thread_local ForwardObserver* ForwardScope::observer_ = nullptr;
constinit thread_local ForwardScope* ForwardScope::innermost_ = nullptr;

void ForwardScope::open(const Module& module) {
  // A forward that calls its base class's forward on the same module (CoatPatchEmbed ->
  // PatchEmbed) is one call of that module, not two nested ones.
  if (innermost_ && innermost_->module_ == &module) return;
  module_ = &module;
  parent_ = innermost_;
  innermost_ = this;
  open_ = true;
  observer_->enter(module);
}

void ForwardScope::close() noexcept {
  innermost_ = parent_;
  if (observer_) observer_->exit(*module_, outputs_);
}

ObserveForward::ObserveForward(ForwardObserver& observer) : previous_(ForwardScope::observer_) {
  ForwardScope::observer_ = &observer;
}

ObserveForward::~ObserveForward() { ForwardScope::observer_ = previous_; }

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.set_grad(Tensor());
}

}  // namespace tessera::nn
