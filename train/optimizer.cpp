// Parameter groups, the optimizer base (state bookkeeping, checkpoint state), AdamW/Adam, SGD,
// the factory by timm name, and global-norm gradient clipping. The update math is ops/optim.
#include "tessera/train/optimizer.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tessera/autograd/grad_mode.h"
#include "tessera/core/graph.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::train {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> split_path(const std::string& name) {
  std::vector<std::string> parts;
  size_t b = 0;
  for (size_t e; (e = name.find('.', b)) != std::string::npos; b = e + 1) parts.push_back(name.substr(b, e - b));
  parts.push_back(name.substr(b));
  return parts;
}

// Leaf names of the tensors that are embeddings, tokens, layer scales or temperatures.
bool is_no_decay_leaf(const std::string& leaf) {
  if (leaf == "pos_embed" || leaf == "dist_token" || leaf == "temperature" || starts_with(leaf, "gamma")) return true;
  if (!starts_with(leaf, "cls_token")) return false;
  return std::all_of(leaf.begin() + 9, leaf.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string join(const std::vector<std::string>& items, size_t limit = 8) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > limit) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out;
}

}  // namespace

bool skip_weight_decay(const std::string& name, const Tensor& param, const std::set<std::string>& extra_no_decay) {
  if (param.dim() <= 1 || ends_with(name, ".bias")) return true;
  const std::vector<std::string> parts = split_path(name);
  if (is_no_decay_leaf(parts.back())) return true;
  if (std::find(parts.begin(), parts.end(), "pos_embed") != parts.end()) return true;
  for (const std::string& pattern : extra_no_decay)
    if (::fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

std::vector<ParamGroup> param_groups(const nn::Module& model, double weight_decay,
                                     const std::set<std::string>& extra_no_decay) {
  TS_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0,
           "param_groups: weight_decay must be finite and >= 0, got ", weight_decay);
  ParamGroup no_decay{{}, 0.0}, decay{{}, weight_decay};
  for (const auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen parameters are not optimised
    if (weight_decay == 0.0 || skip_weight_decay(name, p, extra_no_decay)) no_decay.params.emplace_back(name, p);
    else decay.params.emplace_back(name, p);
  }
  std::vector<ParamGroup> groups;
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  return groups;
}

// ---- Optimizer ------------------------------------------------------------------------------------

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)) {
  set_lr(lr);
  std::unordered_set<std::string> names;
  std::unordered_set<const TensorImpl*> tensors;
  for (const ParamGroup& g : groups_) {
    TS_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0.0,
             "optimizer: weight_decay must be finite and >= 0, got ", g.weight_decay);
    TS_CHECK(std::isfinite(g.lr_scale) && g.lr_scale >= 0.0, "optimizer: lr_scale must be finite and >= 0, got ",
             g.lr_scale);
    for (const auto& [name, p] : g.params) {
      TS_CHECK(p.defined(), "optimizer: parameter '", name, "' is an undefined tensor");
      TS_CHECK(is_floating(p.dtype()), "optimizer: parameter '", name, "' must be floating, got ", describe(p));
      TS_CHECK(names.insert(name).second, "optimizer: the parameter name '", name, "' appears twice");
      TS_CHECK(tensors.insert(p.impl_ptr().get()).second, "optimizer: parameter '", name,
               "' is a tensor already given under another name");
    }
    state_.emplace_back(g.params.size());
  }
}

void Optimizer::set_lr(double lr) {
  TS_CHECK(std::isfinite(lr) && lr >= 0.0, "optimizer: learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (const ParamGroup& g : groups_)
    for (const auto& entry : g.params) entry.second.set_grad(Tensor());
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const ParamGroup& g : groups_)
    for (const auto& entry : g.params) out.push_back(entry.second);
  return out;
}

void Optimizer::set_capturable(bool on) {
  TS_CHECK(!on || supports_capture(), "optimizer ", name(),
           ": not capturable (its per-step values are launch arguments); CUDA Graphs need adamw or adam");
  capturable_ = on;
  begun_ = false;
  if (!on || step_values_.defined()) return;
  const std::vector<Tensor> all = parameters();
  TS_CHECK(!all.empty(), "optimizer ", name(), ": no parameters to make capturable");
  step_values_ = zeros({static_cast<int64_t>(groups_.size()), 3}, DType::Float64, all.front().device());
}

void Optimizer::begin_step(double ema_weight) {
  TS_CHECK(capturable_, "optimizer ", name(), ": begin_step() is for a capturable optimizer (set_capturable)");
  check_not_capturing("Optimizer::begin_step", "the graph would replay this update's learning rate and count for good");
  std::vector<double> values;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    // Every parameter is updated at every step (for_each_batch checks), so a group has one count.
    const int64_t count = state_[gi].empty() ? 1 : state_[gi].front().step + 1;
    for (size_t i = 0; i < state_[gi].size(); ++i) {
      ParamState& st = state_[gi][i];
      TS_CHECK(st.step + 1 == count, "optimizer ", name(), ": ", groups_[gi].params[i].first, " has had ", st.step,
               " updates and ", groups_[gi].params.front().first, " ", count - 1,
               "; a capturable optimizer updates a group's parameters together (CUDA Graphs)");
    }
    for (ParamState& st : state_[gi]) st.step = count;
    values.insert(values.end(), {lr_ * groups_[gi].lr_scale, static_cast<double>(count), ema_weight});
  }
  NoGradGuard no_grad;
  step_values_.copy_(from_vector(values, step_values_.shape()).to(step_values_.device()));
  begun_ = true;
}

Tensor Optimizer::step_values_of(const ParamGroup& group) const {
  if (!capturable_) return Tensor();
  return step_values_.select(0, static_cast<int64_t>(&group - groups_.data()));
}

void Optimizer::for_each_batch(const std::function<BatchUpdate>& update) {
  NoGradGuard no_grad;
  TS_CHECK(!capturable_ || begun_, "optimizer ", name(), ": a capturable optimizer's step() follows begin_step()");
  const size_t nbuf = buffer_names().size();
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    std::map<int64_t, std::vector<size_t>> buckets;  // update count -> parameter indices
    for (size_t i = 0; i < group.params.size(); ++i) {
      const bool has_grad = group.params[i].second.grad().defined();
      TS_CHECK(has_grad || !capturable_, "optimizer ", name(), ": ", group.params[i].first,
               " has no gradient, but a capturable optimizer updates every parameter at every step (CUDA Graphs)");
      if (has_grad) buckets[state_[gi][i].step].push_back(i);
    }
    // Capturable, begin_step() has counted this update already: the counts are its number.
    for (const auto& [counted, indices] : buckets) {
      const int64_t count = capturable_ ? counted - 1 : counted;
      std::vector<Tensor> params, grads;
      std::vector<std::vector<Tensor>> buffers(nbuf);
      for (size_t i : indices) {
        params.push_back(group.params[i].second);
        grads.push_back(group.params[i].second.grad());
        ParamState& st = state_[gi][i];
        st.buffers.resize(nbuf);
        for (size_t k = 0; k < nbuf; ++k) buffers[k].push_back(st.buffers[k]);
      }
      update(group, count + 1, params, grads, buffers);
      for (size_t j = 0; j < indices.size(); ++j) {
        ParamState& st = state_[gi][indices[j]];
        for (size_t k = 0; k < nbuf; ++k) st.buffers[k] = buffers[k][j];
        st.step = count + 1;
      }
    }
  }
  // Cleared only now, and only by a step that ran: a step abandoned half-way by a failed graph
  // capture is run again whole, and so is one recorded into a capture that fails only at its end
  // (a recorded step updates nothing until a replay, and each replay follows its own begin_step()).
  if (!capture_in_progress()) begun_ = false;
}

nn::NamedTensors Optimizer::state_dict() const {
  const std::vector<std::string> bufs = buffer_names();
  nn::NamedTensors out;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const auto& [name, p] = groups_[gi].params[i];
      const ParamState& st = state_[gi][i];
      out.emplace_back(name + ".step", full({}, static_cast<double>(st.step), DType::Int64));
      for (size_t k = 0; k < bufs.size(); ++k) {
        const bool has = k < st.buffers.size() && st.buffers[k].defined();
        out.emplace_back(name + "." + bufs[k], has ? st.buffers[k] : zeros_like(p));
      }
    }
  return out;
}

void Optimizer::load_state_dict(const nn::NamedTensors& state) {
  const std::vector<std::string> bufs = buffer_names();
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [key, t] : state) given.emplace(key, &t);
  std::vector<std::string> missing, mismatched;
  std::unordered_set<std::string> used;
  // Looks up `key`, checking that it holds `dtype` values of `shape`.
  const auto find = [&](const std::string& key, DType dtype, const Shape& shape) -> const Tensor* {
    auto it = given.find(key);
    if (it == given.end()) {
      missing.push_back(key);
      return nullptr;
    }
    used.insert(key);
    const Tensor& t = *it->second;
    if (!t.defined() || t.dtype() != dtype || t.shape() != shape) {
      mismatched.push_back(detail::concat(key, ": expected ", dtype_name(dtype), shape, ", got ",
                                          t.defined() ? describe(t) : std::string("an undefined tensor")));
      return nullptr;
    }
    return &t;
  };
  std::vector<std::vector<ParamState>> loaded(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (const auto& [name, p] : groups_[gi].params) {
      ParamState st;
      if (const Tensor* s = find(name + ".step", DType::Int64, {})) {
        st.step = s->to_vector<int64_t>()[0];  // exact: item() goes through double
        if (st.step < 0) mismatched.push_back(name + ".step: negative update count " + std::to_string(st.step));
      }
      for (const std::string& b : bufs) {
        const Tensor* t = find(name + "." + b, p.dtype(), p.shape());
        // A parameter never updated has no buffers yet (its zeros are a placeholder).
        st.buffers.push_back(t && st.step > 0 ? t->detach().to(p.device()).clone() : Tensor());
      }
      loaded[gi].push_back(std::move(st));
    }
  std::vector<std::string> unexpected;
  for (const auto& entry : state)
    if (!used.count(entry.first)) unexpected.push_back(entry.first);
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string msg = "optimizer " + name() + ": load_state_dict: the state does not match the optimizer";
    if (!missing.empty()) msg += "; missing keys: " + join(missing);
    if (!unexpected.empty()) msg += "; unexpected keys: " + join(unexpected);
    if (!mismatched.empty()) msg += "; mismatched: " + join(mismatched);
    throw Error(msg);
  }
  state_ = std::move(loaded);
}

std::vector<Tensor> Optimizer::step(const UpdateOptions& update) {
  if (update.clip_grad > 0) clip_grad_norm(parameters(), update.clip_grad);
  step();
  return {};
}

// ---- AdamW / Adam -----------------------------------------------------------------------------------

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps, bool decoupled)
    : Optimizer(std::move(groups), lr), config_{lr, beta1, beta2, eps, 0.0, decoupled} {
  TS_CHECK(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0, name(), ": betas must be in [0, 1), got (",
           beta1, ", ", beta2, ")");
  TS_CHECK(std::isfinite(eps) && eps >= 0.0, name(), ": eps must be finite and >= 0, got ", eps);
}

void AdamW::step() { step(FusedStep{}); }

std::vector<Tensor> AdamW::step(const UpdateOptions& update) {
  FusedStep fused;
  if (update.clip_grad > 0) fused.grad_scale = clip_grad_scale(parameters(), update.clip_grad);
  fused.emas = update.emas;
  fused.ema_weight = update.ema_weight;
  return step(fused);
}

std::vector<Tensor> AdamW::step(const FusedStep& fused) {
  const std::vector<Tensor> all = parameters();
  TS_CHECK(fused.emas.empty() || fused.emas.size() == all.size(), name(), ": got ", fused.emas.size(),
           " EMA tensors for ", all.size(), " parameters (one per parameter, undefined for none)");
  std::unordered_map<const TensorImpl*, Tensor> ema_of;  // parameter -> its EMA tensor
  for (size_t i = 0; i < fused.emas.size(); ++i)
    if (fused.emas[i].defined()) ema_of.emplace(all[i].impl_ptr().get(), fused.emas[i]);
  std::vector<Tensor> averaged;
  for_each_batch([&](const ParamGroup& group, int64_t step, const std::vector<Tensor>& params,
                     const std::vector<Tensor>& grads, std::vector<std::vector<Tensor>>& buffers) {
    AdamConfig c = config_;
    c.lr = lr() * group.lr_scale;
    c.weight_decay = group.weight_decay;
    AdamFusion fusion{fused.grad_scale, {}, fused.ema_weight, step_values_of(group)};
    for (const Tensor& p : params) {
      auto it = ema_of.find(p.impl_ptr().get());
      if (it == ema_of.end()) break;
      fusion.emas.push_back(it->second);
    }
    // A batch whose parameters do not all have an EMA tensor leaves its EMA to the caller.
    if (fusion.emas.size() != params.size()) fusion.emas.clear();
    adamw_update_(params, grads, buffers[0], buffers[1], c, step, fusion);
    averaged.insert(averaged.end(), fusion.emas.begin(), fusion.emas.end());
  });
  return averaged;
}

// ---- SGD ---------------------------------------------------------------------------------------------

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, bool nesterov)
    : Optimizer(std::move(groups), lr), config_{lr, momentum, 0.0, 0.0, nesterov} {
  TS_CHECK(std::isfinite(momentum) && momentum >= 0.0, "sgd: momentum must be finite and >= 0, got ", momentum);
  TS_CHECK(!nesterov || momentum > 0.0, "sgd: Nesterov momentum requires momentum > 0, got ", momentum);
}

std::vector<std::string> SGD::buffer_names() const {
  if (config_.momentum == 0.0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  for_each_batch([this](const ParamGroup& group, int64_t step, const std::vector<Tensor>& params,
                        const std::vector<Tensor>& grads, std::vector<std::vector<Tensor>>& buffers) {
    SgdConfig c = config_;
    c.lr = lr() * group.lr_scale;
    c.weight_decay = group.weight_decay;
    std::vector<Tensor> none;
    sgd_update_(params, grads, buffers.empty() ? none : buffers[0], c, step == 1);
  });
}

// ---- factory and clipping --------------------------------------------------------------------------

std::unique_ptr<Optimizer> create_optimizer(const std::string& name, std::vector<ParamGroup> groups, double lr,
                                            double momentum, std::optional<double> eps,
                                            std::optional<std::array<double, 2>> betas) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  const double e = eps.value_or(1e-8);
  const std::array<double, 2> b = betas.value_or(std::array<double, 2>{0.9, 0.999});
  if (key == "adamw" || key == "adam")
    return std::make_unique<AdamW>(std::move(groups), lr, b[0], b[1], e, key == "adamw");
  if (key == "sgd" || key == "nesterov") return std::make_unique<SGD>(std::move(groups), lr, momentum, true);
  if (key == "momentum") return std::make_unique<SGD>(std::move(groups), lr, momentum, false);
  throw Error("create_optimizer: unknown optimizer '" + name +
              "'; valid names: adamw, adam, sgd (Nesterov momentum), nesterov, momentum");
}

namespace {

// The global norm of the gradients of `params` and the factor that clips them to max_norm, both
// 0-d float64 tensors on the gradients' device (the norm never travels through the host).
// `contiguous`: gradients that are views are replaced by contiguous copies (to be scaled in place).
std::pair<Tensor, Tensor> clip_norm_and_scale(const char* op, const std::vector<Tensor>& params, double max_norm,
                                              bool contiguous, std::vector<Tensor>& grads) {
  TS_CHECK(std::isfinite(max_norm) && max_norm > 0.0, op, ": max_norm must be finite and > 0, got ", max_norm);
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    TS_CHECK(p.defined(), op, ": a parameter is an undefined tensor");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (contiguous && !g.is_contiguous()) {  // a gradient set by hand may be a view
      g = g.contiguous();
      p.set_grad(g);
    }
    grads.push_back(g);
  }
  const Tensor norm = sqrt(sum_of_squares(grads));
  const Tensor coef = max_norm / (norm + 1e-6);
  // Below 1 it scales; 1 leaves the gradients exactly as they are (also for a NaN norm, whose
  // comparison is false).
  return {norm, where(lt(coef, scalar_like(1.0, coef)), coef, scalar_like(1.0, coef))};
}

}  // namespace

Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  std::vector<Tensor> grads;
  const auto [norm, scale] = clip_norm_and_scale("clip_grad_norm", params, max_norm, true, grads);
  NoGradGuard no_grad;
  if (!grads.empty()) scale_(grads, scale);
  return norm;
}

Tensor clip_grad_scale(const std::vector<Tensor>& params, double max_norm) {
  std::vector<Tensor> grads;
  return clip_norm_and_scale("clip_grad_scale", params, max_norm, false, grads).second;
}

}  // namespace tessera::train
