// Optimizer math as in-place ops: the AdamW/Adam and SGD parameter updates, the global gradient
// norm, gradient scaling and the EMA interpolation. Each has a multi-tensor form that takes every
// tensor of an update at once, so a device backend can fuse the whole step into one launch (and
// the CPU balances its threads over the total element count, not tensor by tensor); the
// single-tensor forms are that call with one-element lists.
//
// None of these is differentiable: they modify their tensors in place and refuse to run while grad
// mode is on and any operand requires grad. Optimizers call them inside NoGradGuard. Every list
// must hold defined tensors of one floating dtype and one device; the tensors written in place
// (parameters and optimizer state) must be contiguous and must not share memory with each other;
// gradients may be any view.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/kernels/optim.h"  // AdamConfig, AdamFusion, SgdConfig: what the kernels receive

namespace tessera {

// One Adam(W) step, PyTorch 1.13 semantics (torch.optim.AdamW, amsgrad=False), for update number
// `step` (1-based: the first update is step 1):
//   p ← p·(1 − lr·wd)                                     (decoupled only)
//   m ← β1·m + (1 − β1)·g,   v ← β2·v + (1 − β2)·g²
//   p ← p − lr/(1 − β1^step) · m / (√v / √(1 − β2^step) + eps)
// Undefined exp_avg/exp_avg_sq at step 1 are created as zeros (contiguous, like the parameter).
void adamw_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                   double beta2, double eps, double weight_decay, int64_t step, bool decoupled_weight_decay = true);
// The same over lists of equal length (one step number for all). On step 1, empty state lists are
// filled with new zero tensors. `fusion` adds gradient scaling and an EMA update to the pass.
void adamw_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& exp_avgs,
                   std::vector<Tensor>& exp_avg_sqs, const AdamConfig& config, int64_t step,
                   const AdamFusion& fusion = {});

// One SGD step, PyTorch 1.13 semantics (torch.optim.SGD, maximize=False), weight decay coupled:
//   d ← g + wd·p
//   momentum ≠ 0:  b ← d on the first step, else β·b + (1 − dampening)·d;
//                  d ← d + β·b (nesterov) or b
//   p ← p − lr·d
// momentum_buf is not touched when momentum is 0 (it may be undefined); when momentum ≠ 0 an
// undefined buffer is created on the first step.
void sgd_update_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum, double dampening,
                 double weight_decay, bool nesterov, bool first_step);
// The same over lists; momentum_bufs is ignored (may be empty) when momentum is 0, and an empty
// list is filled with new buffers on the first step.
void sgd_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 std::vector<Tensor>& momentum_bufs, const SgdConfig& config, bool first_step);

// Σ x² over every element of every tensor, accumulated in float64 in an order that does not
// depend on the thread count (so a clipped run is reproducible on any machine size). A 0-d
// float64 tensor on the tensors' device: reading it (item()) is the caller's choice, so a device
// computes it without stopping the host.
Tensor sum_of_squares(const std::vector<Tensor>& tensors);
// x ← x·factor for every tensor (contiguous); factor is a one-element tensor on their device (a
// value computed there, such as a clipping coefficient) or a number.
void scale_(const std::vector<Tensor>& tensors, const Tensor& factor);
void scale_(const std::vector<Tensor>& tensors, double factor);
// Mixed-precision loss scaling (torch's _amp_foreach_non_finite_check_and_unscale_): every
// gradient x ← x·inv_scale, and the returned 0-d float64 tensor (on their device) is 1 if any
// gradient held an inf or NaN, else 0. inv_scale is a one-element tensor on their device or a
// number. Nothing is read back: the caller decides when to look at the flag.
Tensor unscale_(const std::vector<Tensor>& grads, const Tensor& inv_scale);
// self ← self + weight·(end − self), computed as torch.lerp does (from the nearer end when
// weight ≥ 0.5); the exponential moving average of weights with weight = 1 − decay. Each end must
// have its self's shape; it is converted to self's dtype when they differ.
void lerp_(const std::vector<Tensor>& selves, const std::vector<Tensor>& ends, double weight);

}  // namespace tessera
