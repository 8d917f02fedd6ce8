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

}  // namespace tessera::nn::init
