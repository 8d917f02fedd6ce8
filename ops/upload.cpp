// Upload (ops/upload.h).
#include "tessera/ops/upload.h"

#include <cstring>

#include "tessera/core/backend.h"
#include "tessera/core/error.h"
#include "tessera/ops/kernels/copy.h"

namespace tessera {

Upload::Upload(const Tensor& host, Device device) : target_(device) {
  TS_CHECK(host.defined() && host.device().is_cpu(), "Upload: expected a CPU tensor to copy to ", device.str(),
           ", got ", host.defined() ? describe(host) : std::string("an undefined tensor"));
  if (device.is_cpu()) {
    device_ = host;
    return;
  }
  host_ = host.contiguous();
  // From pageable memory CUDA may wait for the copy's stream before it stages the bytes, which on a
  // side stream means waiting for the device to finish the work queued so far: staged here instead
  // (a few KB of targets, or a user's batch; the loader's batches are pinned already).
  Allocator* pinned = pinned_host_allocator(device.type);
  if (pinned && &host_.impl().storage->allocator() != pinned) {
    Tensor staged = Tensor::empty(host_.shape(), host_.dtype(), Device::cpu(), *pinned);
    std::memcpy(staged.raw_data(), host_.raw_data(), static_cast<size_t>(host_.numel()) * host_.element_size());
    host_ = staged;
  }
  device_ = Tensor::empty(host_.shape(), host_.dtype(), device);
  copy_ = backend_for(device).copy_beside(host_, device_);
  if (!copy_) to_device_kernel[device](host_, device_);  // no side stream: in the device's order
}

Tensor Upload::ready() {
  TS_CHECK(device_.defined(), "Upload::ready: nothing is being copied (ready() was called already, or never started)");
  if (copy_) backend_for(target_).wait_beside(copy_);
  copy_.reset();
  host_ = Tensor();
  Tensor out = std::move(device_);
  device_ = Tensor();
  return out;
}

}  // namespace tessera
