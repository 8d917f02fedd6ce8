// Model EMA: an exponential moving average of a model's weights, evaluated in place of the model
// (timm --model-ema, timm/utils/model_ema.py ModelEmaV3; DeiT/XCiT/CaiT train with it on).
//
// The average covers the whole state_dict, parameters and buffers: after each optimizer update
//   floating tensors:  ema ← ema + (1 − d)·(model − ema)       (torch.lerp, = d·ema + (1 − d)·model)
//   integer buffers:   ema ← model                              (e.g. BatchNorm num_batches_tracked)
// with d = decay_at(step), ModelEmaV3.get_decay (update_after_step 0, min_decay 0):
//   step = the number of optimizer updates so far, this one included (timm's num_updates);
//   t = step − 1;  t = 0 → d = 0 (the first update copies the model);
//   otherwise d = decay, or with warm-up d = min(decay, 1 − (1 + t)^(−2/3)) (warmup_gamma 1,
//   warmup_power 2/3, timm's defaults).
// Floating tensors are kept in float32 (float64 for a float64 model), whatever the model's
// storage type, so that (1 − d)·(model − ema) is not lost to bfloat16/float16 rounding.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::train {

class ModelEma {
 public:
  // Starts as a copy of the model's current state. decay: --model-ema-decay (timm 0.9998, DeiT
  // 0.99996); warmup: timm's ModelEmaV3 warmup (a library option: `tessera train` has no flag for it).
  explicit ModelEma(const nn::Module& model, double decay = 0.9998, bool warmup = false);

  double decay() const { return decay_; }
  bool warmup() const { return warmup_; }
  // The decay applied by update(model, step).
  double decay_at(int64_t step) const;
  // The lerp weight of that update, 1 − decay_at(step): what an optimizer step that updates the
  // EMA in its own pass (train::FusedStep) must use.
  double weight_at(int64_t step) const { return 1.0 - decay_at(step); }
  // The averaged tensor kept for the model's state_dict entry `key`; undefined when there is none
  // or it is not floating.
  Tensor average_of(const std::string& key) const;
  // One EMA update after optimizer update number `step` (>= 1). The model must have the state_dict
  // keys and shapes the EMA was built from. The averaged tensors in `done` are skipped: an
  // optimizer step already moved them with weight_at(step) (train::AdamW::step(FusedStep)).
  void update(const nn::Module& model, int64_t step, const std::vector<Tensor>& done = {});
  // Writes the averaged weights into `model` (e.g. an evaluation copy), converting dtypes.
  void copy_to(nn::Module& model) const;

  // The averaged tensors under the model's state_dict keys (alias paths share one tensor): save
  // them as a timm-loadable weights file, or in a checkpoint to resume.
  const nn::NamedTensors& state_dict() const { return entries_; }
  // Restores a state_dict(): the same keys and shapes; values are copied (dtype converted).
  void load_state_dict(const nn::NamedTensors& state);

 private:
  nn::NamedTensors entries_;
  std::vector<size_t> unique_;  // indices into entries_ of the distinct tensors (aliases once)
  double decay_;
  bool warmup_;
};

}  // namespace tessera::train
