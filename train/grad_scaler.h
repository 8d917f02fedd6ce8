// Dynamic loss scaling for float16 training (torch.cuda.amp.GradScaler's algorithm and defaults).
// float16 gradients underflow to zero below 6e-8, so the loss is multiplied by a large scale
// before backward and the gradients divided by it afterwards. When any gradient came out inf or
// NaN (the scale was too large), the optimizer step is skipped and the scale halved; after
// `growth_interval` steps without overflow it doubles. bfloat16 has float32's range and needs none.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/nn/module.h"

namespace tessera::train {

class GradScaler {
 public:
  explicit GradScaler(double init_scale = 65536.0, double growth_factor = 2.0, double backoff_factor = 0.5,
                      int64_t growth_interval = 2000);

  // loss · scale (a new tensor on the loss's device).
  Tensor scale(const Tensor& loss) const;
  // Divides every defined gradient of `params` by the scale, in place, and returns whether all were
  // finite (one value read from the device: the step's only wait, beside the loss).
  bool unscale_(const std::vector<Tensor>& params);
  // After a step was taken (finite) or skipped (not finite): backs the scale off or counts towards
  // growing it.
  void update(bool finite);

  double scale_value() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }

  // For checkpoints: the scale and the count of clean steps since its last change (and the skips).
  nn::NamedTensors state_dict() const;
  void load_state_dict(const nn::NamedTensors& state);

 private:
  double scale_, growth_factor_, backoff_factor_;
  int64_t growth_interval_, growth_tracker_ = 0, skipped_ = 0;
};

}  // namespace tessera::train
