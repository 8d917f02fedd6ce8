// Kernel interface of the optimizer family (internal). Every kernel gets whole tensor lists, as a
// multi-tensor-apply kernel would: the front end (ops/optim.cpp) has checked that the lists have
// equal lengths, that corresponding tensors have equal shapes, and that all tensors are
// contiguous, of one floating dtype and on one device.
#pragma once
#include <vector>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/optim.h"

namespace tessera {

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

extern KernelTable<AdamKernel> adam_kernel;
extern KernelTable<SgdKernel> sgd_kernel;
extern KernelTable<SumSquaresKernel> sum_squares_kernel;
extern KernelTable<ScaleKernel> scale_kernel;
extern KernelTable<LerpKernel> lerp_kernel;
extern KernelTable<UnscaleKernel> unscale_kernel;

}  // namespace tessera
