// timm's --sync-bn: every BatchNorm2d of a model normalizes with the statistics of the whole
// data-parallel batch (nn/layers.h, BatchNorm2d::sum_over_processes). XCiT's convolutional patch
// embedding and LPI blocks use batch norm; with a small per-process batch their statistics are
// noisy, and without synchronization every process would keep different running statistics.
#pragma once
#include <cstdint>
#include <memory>

#include "tessera/nn/module.h"
#include "tessera/train/distributed/communicator.h"

namespace tessera::train::dist {

// The sum of x over comm's ranks (a fresh tensor), differentiable: every rank's loss depends on
// every rank's x through the sum, so the gradient of x is the sum of the ranks' output gradients.
// Every rank must call it in the same order.
Tensor all_reduce_sum(const Tensor& x, const std::shared_ptr<Communicator>& comm);

// Synchronizes every BatchNorm2d in `model` over comm's ranks; returns how many there were.
int64_t convert_sync_batchnorm(nn::Module& model, const std::shared_ptr<Communicator>& comm);

}  // namespace tessera::train::dist
