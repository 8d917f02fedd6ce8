// Kernel interface of the optimizer family (internal). Every kernel gets whole tensor lists, as a
// multi-tensor-apply kernel would: the front end (ops/optim.cpp) has checked that the lists have
// equal lengths, that corresponding tensors have equal shapes, and that all tensors are
// contiguous, of one floating dtype and on one device.
#pragma once
#include <vector>

#include "tessera/core/dispatch.h"
#include "tessera/core/host_device.h"
#include "tessera/core/tensor.h"

namespace tessera {

// The hyper-parameters the front ends (ops/optim.h) take and pass to the kernels as they are.
// Adam hyper-parameters (torch.optim.Adam/AdamW names and defaults except lr).
struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // true: AdamW's decoupled decay p *= 1 - lr·wd (Loshchilov & Hutter 2019); false: Adam's L2
  // term, g += wd·p before the moments.
  bool decoupled = true;
};

// Work done in the same pass as a multi-tensor Adam(W) step (on a device, the same launch): the
// scaling of gradient clipping before the update and the model EMA after it. Each gives the bits
// the separate op gives — scale_(grads, grad_scale) before the step, lerp_(emas, params,
// ema_weight) after it — so fusing never changes a training run.
struct AdamFusion {
  // A one-element tensor on the parameters' device (train::clip_grad_scale's factor, computed
  // there and never read by the host): every gradient is read as g·grad_scale, the product
  // rounded to the parameters' dtype as scale_ would store it. The gradients themselves are left
  // as they are. Undefined: the gradients are used as given.
  Tensor grad_scale;
  // Empty, or one tensor per parameter (its shape, dtype and device, contiguous, sharing memory
  // with nothing else written): after each element of a parameter is updated, its EMA element
  // becomes lerp(ema, p, ema_weight), computed as lerp_ computes it (ema_weight = 1 − decay).
  std::vector<Tensor> emas;
  double ema_weight = 0.0;
  // Undefined, or a float64 tensor of 3 contiguous elements on the parameters' device holding
  // (lr, step, ema_weight): these replace config.lr, the step number and ema_weight, and the
  // kernel reads them when it runs. A CUDA Graph replays a step with the arguments it was captured
  // with; the values that change from step to step are rewritten here before each replay
  // (train::Optimizer::set_capturable).
  Tensor step_values;
};

// Adam's per-element constants for update number `step` at learning rate `lr`, computed in double
// and rounded once to T, as PyTorch passes Python floats to its ops. One formula for the host and,
// where the step values live on the device (AdamFusion::step_values), for a GPU thread.
template <class T>
struct AdamConstants {
  T b1, b2, one_b1, one_b2, eps, decay, step_size, bc2_sqrt, coupled_wd;
  bool coupled;
};

template <class T, class Math>
TS_HOST_DEVICE AdamConstants<T> adam_constants(const AdamConfig& c, double lr, double step, Math math) {
  return {T(c.beta1),
          T(c.beta2),
          T(1.0 - c.beta1),
          T(1.0 - c.beta2),
          T(c.eps),
          T(c.decoupled ? 1.0 - lr * c.weight_decay : 1.0),
          T(lr / (1.0 - math.pow(c.beta1, step))),
          T(math.sqrt(1.0 - math.pow(c.beta2, step))),
          T(c.decoupled ? 0.0 : c.weight_decay),
          !c.decoupled && c.weight_decay != 0.0};
}

// SGD hyper-parameters (torch.optim.SGD names and defaults except lr).
struct SgdConfig {
  double lr = 0.1;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// One Adam(W) step number `step` (≥ 1) over params/grads/exp_avgs/exp_avg_sqs, with the work of
// `fusion` in the same pass (one launch on a device). The front end has checked fusion.emas like
// the state lists (empty or one per parameter) and made fusion.grad_scale undefined or a 0-d
// float64 tensor on the device.
using AdamKernel = void(const AdamConfig& config, int64_t step, const std::vector<Tensor>& params,
                        const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
                        const std::vector<Tensor>& exp_avg_sqs, const AdamFusion& fusion);
// One SGD step; bufs is empty when config.momentum is 0.
using SgdKernel = void(const SgdConfig& config, bool first_step, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& grads, const std::vector<Tensor>& bufs);
// out (a 0-d float64 tensor on the tensors' device) = Σ x², accumulated in float64 in an order that
// depends on the data only (not on the thread count or launch shape).
using SumSquaresKernel = void(const std::vector<Tensor>& tensors, const Tensor& out);
// x ← x·factor, factor a 0-d float64 tensor on the tensors' device (so a factor computed on the
// device, such as a gradient-clipping coefficient, never travels through the host).
using ScaleKernel = void(const std::vector<Tensor>& tensors, const Tensor& factor);
// Mixed-precision loss scaling: x ← x·inv_scale for every gradient, and found_inf (a 0-d float64
// tensor on the same device, 0 on entry) set to 1 if any gradient held a non-finite value.
// inv_scale is a 0-d float64 tensor on the device.
using UnscaleKernel = void(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf);
// self ← lerp(self, end, weight) (ends already in self's dtype).
using LerpKernel = void(const std::vector<Tensor>& selves, const std::vector<Tensor>& ends, double weight);

}  // namespace tessera
