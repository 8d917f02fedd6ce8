// The basic layers: Linear, Conv2d, LayerNorm, BatchNorm2d, GELU, Identity, Dropout, DropPath,
// Sequential. Parameter names and initialisation follow PyTorch (timm models re-initialise some
// of them, as timm's _init_weights does).
#pragma once
#include <functional>
#include <array>

#include "tessera/nn/module.h"
#include "tessera/ops/creation.h"

namespace tessera::nn {

// y = x·Wᵀ + b, weight [out, in].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  Tensor weight, bias;
};

// The ViT-style initialisation of a Linear (timm's _init_weights): weight trunc_normal(std), bias 0.
void init_trunc_normal(Linear& layer, double std = 0.02);

// 2-D convolution, weight [out, in/groups, kH, kW]; groups == in == out is depthwise.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel,
         std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0}, int64_t groups = 1,
         bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  Tensor weight, bias;
  std::array<int64_t, 2> stride, padding;
  int64_t groups;
};

// Layer norm over the last dim (eps differs per model: 1e-6 in the ViT blocks, 1e-5 by default).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  Tensor weight, bias;
  double eps;
};

// Batch norm over the channels of [N, C, H, W], with running statistics updated in training and
// used in eval; buffers running_mean, running_var and num_batches_tracked as PyTorch.
//
// Synchronized (timm's --sync-bn, PyTorch's SyncBatchNorm): with `sum_over_processes` set, training
// normalizes with the mean and variance of the whole batch of a data-parallel job, every process's
// samples, and the running statistics follow them. The function sums a small tensor over the
// processes and must be differentiable (its gradient: the sum of the processes' gradients);
// train/distributed/sync_batch_norm.h installs it, so this layer names no communicator.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps, momentum;
  std::function<Tensor(const Tensor&)> sum_over_processes;

 private:
  Tensor synchronized_forward(const Tensor& x, bool track_running_stats);
};

class GELU : public Module {
 public:
  explicit GELU(bool approximate = false) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }

 private:
  bool approximate_;
};

class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return ForwardScope(*this).output(x); }
  std::string type_name() const override { return "Identity"; }
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  double p;
};

// Stochastic depth (Huang et al. 2016): zeroes the whole residual branch of a sample with
// probability p during training and scales survivors by 1/(1-p); identity in eval.
Tensor drop_path(const Tensor& x, double p, bool training, Generator* gen = nullptr);
// The per-sample factors drop_path multiplies by: [x.size(0)] values 0 or 1/(1-p) in x's dtype on
// x's device, or an undefined tensor when drop_path is the identity (eval, or p = 0).
Tensor drop_path_scale(const Tensor& x, double p, bool training, Generator* gen = nullptr);

// x + drop_path(gamma ⊙ branch): the residual connection with LayerScale of CaiT (§2.1, Eq. 3)
// and XCiT (η-initialised gammas) with stochastic depth, timm's
// `x + self.drop_path(self.gamma * branch)`: layer_scale_residual (ops/layer_scale_residual.h), one
// fused pass, with drop_path's per-sample scale.
Tensor drop_path_residual(const Tensor& x, const Tensor& branch, const Tensor& gamma, double drop_path_p,
                          bool training);

class DropPath : public Module {
 public:
  explicit DropPath(double p = 0.0);
  Tensor forward(const Tensor& x) override {
    ForwardScope scope(*this);
    return scope.output(drop_path(x, p, is_training()));
  }
  std::string type_name() const override { return "DropPath"; }
  double p;
};

// Children named "0", "1", ... (timm's nn.ModuleList); the owner calls them.
template <class M = Module>
class ModuleList : public Module {
 public:
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    modules_.push_back(m);
    return register_module(std::to_string(modules_.size() - 1), std::move(m));
  }
  std::string type_name() const override { return "ModuleList"; }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<M>& operator[](size_t i) const { return modules_.at(i); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<M>> modules_;
};

// A ModuleList applied in order. Parameter-less children (GELU) take an index too, which is what
// makes timm's "patch_embed.proj.2.0.weight" come out right.
class Sequential : public ModuleList<Module> {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
};

}  // namespace tessera::nn
