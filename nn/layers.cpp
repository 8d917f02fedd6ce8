#include "tessera/nn/layers.h"

#include <algorithm>

#include "tessera/nn/checkpoint.h"
#include "tessera/nn/init.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias) {
  TS_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got in=", in_features,
           " out=", out_features);
  weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
  if (has_bias) bias = register_parameter("bias", Tensor::empty({out_features}));
  init::default_weight_and_bias_(weight, bias);
}

Tensor Linear::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return scope.output(linear(x, weight, bias));
}

void init_trunc_normal(Linear& layer, double std) {
  init::trunc_normal_(layer.weight, std);
  if (layer.bias.defined()) init::constant_(layer.bias, 0.0);
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride_,
               std::array<int64_t, 2> padding_, int64_t groups_, bool has_bias)
    : stride(stride_), padding(padding_), groups(groups_) {
  TS_CHECK(groups > 0 && in_channels % groups == 0 && out_channels % groups == 0, "Conv2d: groups ", groups,
           " must divide in_channels ", in_channels, " and out_channels ", out_channels);
  weight = register_parameter("weight", Tensor::empty({out_channels, in_channels / groups, kernel[0], kernel[1]}));
  if (has_bias) bias = register_parameter("bias", Tensor::empty({out_channels}));
  init::default_weight_and_bias_(weight, bias);
}

Tensor Conv2d::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return scope.output(conv2d(x, weight, bias, stride, padding, {1, 1}, groups));
}

LayerNorm::LayerNorm(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return scope.output(layer_norm(x, weight, bias, eps));
}

BatchNorm2d::BatchNorm2d(int64_t channels, double eps_, double momentum_) : eps(eps_), momentum(momentum_) {
  weight = register_parameter("weight", ones({channels}));
  bias = register_parameter("bias", zeros({channels}));
  running_mean = register_buffer("running_mean", zeros({channels}));
  running_var = register_buffer("running_var", ones({channels}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  ForwardScope scope(*this);
  TS_CHECK(x.dim() == 4, "BatchNorm2d: expected [N, C, H, W], got ", x.shape());
  // A checkpoint's backward recomputing this forward (nn/checkpoint.h) normalises with the batch's
  // statistics again, but the running statistics were updated once already.
  const bool recompute = is_training() && recomputing();
  if (is_training() && !recompute) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(scalar_like(1.0, num_batches_tracked));  // on the buffer's device
  }
  if (is_training() && sum_over_processes) return scope.output(synchronized_forward(x, !recompute));
  return scope.output(batch_norm(x, recompute ? Tensor() : running_mean, recompute ? Tensor() : running_var, weight,
                                 bias, is_training(), momentum, eps));
}

Tensor BatchNorm2d::synchronized_forward(const Tensor& x, bool track_running_stats) {
  const int64_t c = x.size(1);
  const Shape per_channel{1, c, 1, 1};
  // The element count travels with the sums: the last batch of an epoch may differ between ranks.
  const Tensor count = full({1}, static_cast<double>(x.numel() / c), x.dtype(), x.device());
  const Tensor sums = sum_over_processes(cat({sum(x, {0, 2, 3}), count}, 0));
  const double n = sums.narrow(0, c, 1).item();
  const Tensor mean = sums.narrow(0, 0, c) / n;
  // The variance from centred values, a second reduction: E[x²] − mean² cancels badly in float32.
  const Tensor centred = x - mean.view(per_channel);
  const Tensor var = sum_over_processes(sum(centred * centred, {0, 2, 3})) / n;
  Tensor y = centred * rsqrt(var + eps).view(per_channel);
  if (weight.defined()) y = y * weight.view(per_channel) + bias.view(per_channel);
  if (!track_running_stats) return y;
  NoGradGuard no_grad;
  running_mean.copy_(running_mean * (1.0 - momentum) + mean.detach() * momentum);
  running_var.copy_(running_var * (1.0 - momentum) + var.detach() * (momentum * n / std::max(n - 1.0, 1.0)));
  return y;
}

Tensor GELU::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return scope.output(gelu(x, approximate_));
}

Dropout::Dropout(double p_) : p(p_) {
  TS_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return scope.output(dropout(x, p, is_training()));
}

Tensor drop_path_scale(const Tensor& x, double p, bool training, Generator* gen) {
  TS_CHECK(p >= 0.0 && p < 1.0, "drop_path: probability must be in [0, 1), got ", p);
  if (!training || p == 0.0) return Tensor();
  TS_CHECK(x.dim() >= 1, "drop_path: expected a batched tensor, got a 0-d one");
  // Drawn on x's device, so the mask is the same on every device (ops/kernels/random.h).
  Tensor u = rand({x.size(0)}, DType::Float64, gen, x.device());
  Tensor keep = lt(u, constant_scalar(1.0 - p, u));
  // A per-sample constant beside x: in x's accumulation dtype (float32 beside half activations).
  const DType dtype = accumulate_dtype(x.dtype());
  return where(keep, full({}, 1.0 / (1.0 - p), dtype, x.device()), full({}, 0.0, dtype, x.device()));
}

Tensor drop_path(const Tensor& x, double p, bool training, Generator* gen) {
  const Tensor scale = drop_path_scale(x, p, training, gen);
  if (!scale.defined()) return x;
  Shape per_sample(x.dim(), 1);
  per_sample[0] = x.size(0);
  return x * scale.view(per_sample).to(x.dtype());
}

Tensor drop_path_residual(const Tensor& x, const Tensor& branch, const Tensor& gamma, double drop_path_p,
                          bool training) {
  return layer_scale_residual(x, branch, gamma, drop_path_scale(x, drop_path_p, training));
}

DropPath::DropPath(double p_) : p(p_) {
  TS_CHECK(p >= 0.0 && p < 1.0, "DropPath: probability must be in [0, 1), got ", p);
}

Tensor Sequential::forward(const Tensor& x) {
  ForwardScope scope(*this);
  Tensor y = x;
  for (const auto& m : *this) y = m->forward(y);
  return scope.output(y);
}

}  // namespace tessera::nn
