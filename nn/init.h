// Parameter initialisation, in place (under NoGradGuard), following PyTorch/timm.
#pragma once
#include "tessera/core/tensor.h"
#include "tessera/ops/creation.h"

namespace tessera::nn::init {

// timm's trunc_normal_(t, std): N(mean, std²) cut at the absolute bounds [a, b].
void trunc_normal_(Tensor& t, double std = 0.02, double mean = 0.0, double a = -2.0, double b = 2.0);
void uniform_(Tensor& t, double lo, double hi);
void constant_(Tensor& t, double value);
// PyTorch's default for Linear/Conv: weight kaiming_uniform(a=√5) = U(±1/√fan_in), and the bias
// U(±1/√fan_in), where fan_in = in_features (Linear) or in_channels/groups·kH·kW (Conv).
void default_weight_and_bias_(Tensor& weight, Tensor& bias);

// While one is alive on this thread, the functions above leave tensors as they are: a model built
// under it has its parameters allocated but not drawn (like PyTorch's torch.nn.utils.skip_init),
// for a model whose weights are loaded next or whose parameters are only counted. Drawing the
// weights is most of the time of building a large model (cait_m48_448: seconds per 100M
// parameters); values left undrawn are whatever the allocation held.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;
  static bool active();

 private:
  bool previous_;
};

}  // namespace tessera::nn::init
