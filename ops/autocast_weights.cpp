#include "tessera/ops/autocast_weights.h"

#include "tessera/autograd/function.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/core/autocast.h"
#include "tessera/core/levers.h"
#include "tessera/ops/cast_all.h"

namespace tessera {

namespace {
constinit thread_local AutocastWeights::Pass* current_pass = nullptr;
}  // namespace

AutocastWeights::AutocastWeights(bool enabled) : enabled_(enabled && levers().cast_ahead) {}

AutocastWeights::Pass::Pass(AutocastWeights& owner, Device device) : previous_(current_pass) {
  const std::optional<DType> low = autocast_dtype(device);
  if (!owner.enabled_ || !low) return;
  owner_ = &owner;
  low_ = *low;
  inference_ = !autograd::grad_enabled();
  // The copies an earlier inference pass left, of weights not written since.
  if (inference_)
    for (const Kept& k : owner.kept_)
      if (k.copy.dtype() == low_ && k.weight.version() == k.version) copies_.emplace(&k.weight.impl(), k.copy);
  owner.kept_.clear();
  std::vector<Tensor> weights;
  for (const Tensor& w : owner.learned_)
    if (w.device() == device && w.dtype() == DType::Float32 && !copies_.count(&w.impl())) weights.push_back(w);
  const std::vector<Tensor> copies = cast_all(weights, low_);
  for (size_t i = 0; i < weights.size(); ++i) copies_.emplace(&weights[i].impl(), copies[i]);
  current_pass = this;
}

AutocastWeights::Pass::~Pass() {
  if (owner_ == nullptr) return;
  current_pass = previous_;
  if (inference_)
    for (const Tensor& w : used_in_order_) owner_->kept_.push_back({w, copies_.at(&w.impl()), w.version()});
  owner_->learned_ = std::move(used_in_order_);
}

Tensor autocast_cast(const Tensor& t, DType low) {
  AutocastWeights::Pass* pass = current_pass;
  if (pass == nullptr || low != pass->low_ || t.dtype() != DType::Float32 || !t.is_leaf() || !t.requires_grad())
    return t.to(low);
  const TensorImpl* key = &t.impl();
  const auto it = pass->copies_.find(key);
  if (pass->used_.insert(key).second) {  // the first use: the copy made ahead, or a cast kept
    pass->used_in_order_.push_back(t);
    if (it != pass->copies_.end()) return it->second;
    return pass->copies_.emplace(key, t.to(low)).first->second;
  }
  // A later use reads the same rounded values with a gradient of its own, brought back to float32
  // by itself and summed there with the others' as per-use casts' are (sharing the first use's
  // gradient would sum them in 16 bits). No launch forward; one backward, as a cast's.
  Tensor again = it->second.detach();
  if (autograd::needs_grad({t}))
    autograd::record("ToDTypeBackward", {t}, again,
                     [](const Tensor& g, const GradMask&) { return std::vector<Tensor>{g.to(DType::Float32)}; });
  return again;
}

}  // namespace tessera
