// A host-to-device copy that runs beside the work queued on the device (on a side stream of the
// CUDA backend), so that copying the next batch overlaps the step computing on the current one:
//
//   Upload next(host_batch, device);      // step b+1's batch, copied while step b computes
//   ... queue step b ...
//   Tensor images = next.ready();         // step b+1 waits for the copy (on the device, not the host)
//
// The device tensor may be used only through ready(). The host tensor is kept until ready() has
// queued the wait: the pinned allocator's release events (cuda/memory.cpp) follow the device's own
// stream, so the host memory must not return to it before that stream is ordered after the copy.
// On the CPU, or on a backend without side streams, the copy is made at once, as Tensor::to makes it.
#pragma once
#include <memory>

#include "tessera/core/device.h"
#include "tessera/core/tensor.h"

namespace tessera {

class Upload {
 public:
  Upload() = default;
  // Starts copying `host` (a CPU tensor) to `device`; one not in the backend's pinned memory is first
  // copied into it, so that the copy never waits for the device.
  Upload(const Tensor& host, Device device);
  bool pending() const { return device_.defined(); }
  // The tensor on the device, its stream ordered after the copy. Once.
  Tensor ready();

 private:
  Tensor host_, device_;
  Device target_ = Device::cpu();
  std::shared_ptr<void> copy_;  // the backend's record of the side-stream copy; null if made at once
};

}  // namespace tessera
