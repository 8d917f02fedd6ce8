// The training batches on the model's device, the next one's host-to-device copy started (beside
// the device's work: ops/upload.h) before the current one is handed out, so that on a GPU the copy
// of batch b+1 overlaps the step computing on batch b (timm's PrefetchLoader, with the same
// one-batch lookahead). The host's part of a batch, Mixup/CutMix mixing its images and making soft
// targets, is done before its copy. On the CPU the batch is taken when it is asked for: there is
// nothing to overlap.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>

#include "tessera/core/tensor.h"
#include "tessera/data/loader.h"
#include "tessera/ops/upload.h"

namespace tessera::train {

class DeviceBatches {
 public:
  // A batch's targets, made on the host: its labels, or Mixup's soft targets (the images mixed in
  // place). Called in batch order.
  using Targets = std::function<Tensor(data::Batch& batch, int64_t epoch, int64_t index)>;

  DeviceBatches(data::DataLoader& loader, Device device, Targets targets);

  // Starts `epoch` (the loader's start_epoch is the caller's), of which `count` batches will be
  // asked for: no batch beyond them is taken from the loader.
  void start_epoch(int64_t epoch, int64_t count);

  struct Item {
    Tensor images, targets;  // on the device
    int64_t count = 0;       // images in the batch
  };
  // Batch `index` of the epoch; indices come 0, 1, 2, ... Throws when the loader ends early.
  Item next(int64_t index);

 private:
  struct Pending {
    Upload images, targets;
    int64_t count = 0;
    int64_t index = -1;
  };
  Pending fetch(int64_t index);

  data::DataLoader& loader_;
  Device device_;
  Targets targets_;
  bool lookahead_;
  int64_t epoch_ = 0, count_ = 0;
  std::optional<Pending> next_;
};

}  // namespace tessera::train
