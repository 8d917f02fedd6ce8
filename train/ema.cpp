// Model EMA (formulas and timm source in train/ema.h). The floating tensors of the model are
// averaged by one multi-tensor lerp_ (ops/optim.h), the same fused kernel on every device; under
// AdamW the trainer has the parameters' averages moved inside the optimizer's own launch
// (train::FusedStep), and lerp_ does the rest (buffers, parameters without a gradient).
#include "tessera/train/ema.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/optim.h"

namespace tessera::train {

namespace {

// The dtype the average is kept in: float32, or float64 for float64 tensors; integers as they are.
DType ema_dtype(DType model_dtype) {
  if (!is_floating(model_dtype)) return model_dtype;
  return model_dtype == DType::Float64 ? DType::Float64 : DType::Float32;
}

}  // namespace

ModelEma::ModelEma(const nn::Module& model, double decay, bool warmup) : decay_(decay), warmup_(warmup) {
  TS_CHECK(std::isfinite(decay) && decay >= 0.0 && decay <= 1.0, "ModelEma: decay must be in [0, 1], got ", decay);
  NoGradGuard no_grad;
  std::unordered_map<const TensorImpl*, size_t> seen;  // model tensor -> its entry
  for (const auto& [name, t] : model.state_dict()) {
    auto it = seen.find(t.impl_ptr().get());
    if (it != seen.end()) {  // an alias path: share the averaged tensor
      entries_.emplace_back(name, entries_[it->second].second);
      continue;
    }
    seen.emplace(t.impl_ptr().get(), entries_.size());
    unique_.push_back(entries_.size());
    entries_.emplace_back(name, t.detach().to(ema_dtype(t.dtype())).clone());
  }
}

double ModelEma::decay_at(int64_t step) const {
  TS_CHECK(step >= 1, "ModelEma: step must be >= 1 (the number of optimizer updates so far), got ", step);
  const double t = static_cast<double>(step - 1);
  if (t <= 0) return 0.0;
  if (!warmup_) return decay_;
  return std::max(std::min(1.0 - std::pow(1.0 + t, -2.0 / 3.0), decay_), 0.0);
}

Tensor ModelEma::average_of(const std::string& key) const {
  for (const auto& [name, ema] : entries_)
    if (name == key) return is_floating(ema.dtype()) ? ema : Tensor();
  return Tensor();
}

void ModelEma::update(const nn::Module& model, int64_t step, const std::vector<Tensor>& done) {
  const double weight = weight_at(step);
  NoGradGuard no_grad;
  const nn::NamedTensors current = model.state_dict();
  TS_CHECK(current.size() == entries_.size(), "ModelEma: the model has ", current.size(),
           " state_dict entries, the EMA was built from ", entries_.size());
  std::unordered_set<const TensorImpl*> skip;
  for (const Tensor& t : done) skip.insert(t.impl_ptr().get());
  std::vector<Tensor> selves, ends;
  for (size_t i : unique_) {
    const auto& [name, ema] = entries_[i];
    const auto& [model_name, value] = current[i];
    TS_CHECK(model_name == name && value.shape() == ema.shape(), "ModelEma: model entry ", i, " is '", model_name, "' ",
             value.shape(), ", the EMA has '", name, "' ", ema.shape());
    if (skip.count(ema.impl_ptr().get())) continue;
    if (is_floating(ema.dtype())) {
      selves.push_back(ema);
      ends.push_back(value);
    } else {
      Tensor(ema).copy_(value);
    }
  }
  lerp_(selves, ends, weight);
}

void ModelEma::copy_to(nn::Module& model) const {
  NoGradGuard no_grad;
  model.load_state_dict(entries_);
}

void ModelEma::load_state_dict(const nn::NamedTensors& state) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [key, t] : state) given.emplace(key, &t);
  std::vector<std::string> problems;
  for (const auto& [name, ema] : entries_) {
    auto it = given.find(name);
    if (it == given.end()) problems.push_back("missing '" + name + "'");
    else if (!it->second->defined() || it->second->shape() != ema.shape())
      problems.push_back(detail::concat("'", name, "': expected ", ema.shape(), ", got ",
                                        it->second->defined() ? describe(*it->second) : std::string("undefined")));
  }
  if (state.size() != entries_.size() || !problems.empty()) {
    std::unordered_map<std::string, bool> known;
    for (const auto& entry : entries_) known.emplace(entry.first, true);
    for (const auto& entry : state)
      if (!known.count(entry.first)) problems.push_back("unexpected '" + entry.first + "'");
  }
  if (!problems.empty()) {
    std::string msg = "ModelEma: load_state_dict: the state does not match the model";
    for (size_t i = 0; i < problems.size() && i < 8; ++i) msg += (i ? ", " : ": ") + problems[i];
    if (problems.size() > 8) msg += ", ... (" + std::to_string(problems.size()) + " problems)";
    throw Error(msg);
  }
  NoGradGuard no_grad;
  for (const auto& [name, ema] : entries_) Tensor(ema).copy_(given.at(name)->to(ema.device()));
}

}  // namespace tessera::train
