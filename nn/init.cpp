#include "tessera/nn/init.h"

#include <cmath>

#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/ops.h"

namespace tessera::nn::init {

namespace {
thread_local bool skip_init = false;
}

SkipInitGuard::SkipInitGuard() : previous_(skip_init) { skip_init = true; }
SkipInitGuard::~SkipInitGuard() { skip_init = previous_; }
bool SkipInitGuard::active() { return skip_init; }

void trunc_normal_(Tensor& t, double std, double mean, double a, double b) {
  if (skip_init) return;
  NoGradGuard no_grad;
  t.copy_(trunc_normal(t.shape(), mean, std, a, b, DType::Float64, nullptr, t.device()).to(t.dtype()));
}

void uniform_(Tensor& t, double lo, double hi) {
  if (skip_init) return;
  NoGradGuard no_grad;
  t.copy_((rand(t.shape(), DType::Float64, nullptr, t.device()) * (hi - lo) + lo).to(t.dtype()));
}

void constant_(Tensor& t, double value) {
  if (skip_init) return;
  NoGradGuard no_grad;
  t.fill_(value);
}

void default_weight_and_bias_(Tensor& weight, Tensor& bias) {
  int64_t fan_in = weight.numel() / weight.size(0);
  double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  uniform_(weight, -bound, bound);
  if (bias.defined()) uniform_(bias, -bound, bound);
}

}  // namespace tessera::nn::init
