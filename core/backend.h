// The hook through which a device backend plugs into core. core/ knows no backend: the CUDA
// backend (cuda/, real or emulated) registers a DeviceBackend for DeviceType::CUDA when the
// program starts (a static registration in cuda/backend.cpp, linked into every program that links
// Tessera), and fills the CUDA slots of the kernel tables the same way. Nothing here touches a
// device until it is used, so a build with the CUDA backend runs on a machine without a GPU until
// a tensor is put on one (then the error says why it cannot be).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "tessera/core/allocator.h"
#include "tessera/core/device.h"
#include "tessera/core/graph.h"

namespace tessera {

class Tensor;

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Usable devices of this type: 0 when the backend is compiled in but cannot run here (no GPU,
  // driver too old); unavailable_reason() then says why.
  virtual int device_count() = 0;
  virtual std::string unavailable_reason() = 0;
  // One line for listings: "CUDA 13.0, NVIDIA H100 80GB HBM3" or "SIMT emulator (CPU)".
  virtual std::string description() = 0;
  virtual Allocator& allocator(int index) = 0;
  // Blocks until the work queued on device `index` has finished, and reports (throws) an error a
  // kernel recorded there, such as an out-of-range index.
  virtual void synchronize(int index) = 0;
  virtual int current_device() = 0;
  virtual void set_current_device(int index) = 0;
  // Page-locked host memory for data bound for this backend's devices (a data loader's batches):
  // copies from it run asynchronously. Null where the backend has none.
  virtual Allocator* pinned_host_allocator() { return nullptr; }
  // Copies beside the device's work (ops/upload.h): queues the copy of `src` (host, contiguous) into
  // `dst` (this backend's, contiguous, allocated on the device's stream) on a side stream of dst's
  // device, once the work already queued on the device's stream is done with dst's memory, and
  // returns what wait_beside takes. Null, with nothing copied, where the backend has no side stream.
  virtual std::shared_ptr<void> copy_beside(const Tensor& src, const Tensor& dst);
  // Makes the device's stream wait for a copy_beside (queued: the host does not wait).
  virtual void wait_beside(const std::shared_ptr<void>& copy);
  // Records the work `work` queues on device `index` into a graph (core/graph.h); the base refuses.
  virtual std::unique_ptr<DeviceGraph> capture_graph(int index, const std::function<void()>& work);
  // A timing mark queued on device `index`'s stream (a CUDA event): the device reaches it once the
  // work queued before it has run, and the host does not wait. The profiler times an op's device
  // work between two marks. Null where the backend cannot time (the base), or while it captures.
  virtual std::shared_ptr<void> mark_time(int index);
  // Milliseconds between two marks of one device, once both are reached (after a synchronisation).
  virtual double elapsed_ms(const std::shared_ptr<void>& from, const std::shared_ptr<void>& to);
  // The shared memory (bytes) one block of the backend's kernels that tile through it may use on
  // device `index`; 0 where the backend has none (the base).
  virtual size_t block_shared_memory(int index);
};

void register_backend(DeviceType type, DeviceBackend* backend);
// The backend of `type`, or null when none is compiled in.
DeviceBackend* find_backend(DeviceType type);
// The backend of `device`; throws naming the device and the reason when it is not usable.
DeviceBackend& backend_for(Device device);

// Number of usable devices of `type` (1 for the CPU).
int device_count(DeviceType type);
bool is_available(Device device);
// Why `device` cannot be used ("" when it can).
std::string unavailable_reason(Device device);
// Waits for the device's queued work (no-op on the CPU).
void synchronize(Device device);
// The shared memory one block may use on `device` (DeviceBackend::block_shared_memory; 0 on the
// CPU): the front ends of fused ops size their device kernels' tiles by it, and compose ops instead
// where even one tile does not fit.
size_t block_shared_memory(Device device);
// Statistics of the allocator that serves `device`.
AllocatorStats allocator_stats(Device device);
void empty_cache(Device device);
// The pinned host allocator of `type`'s backend (null for the CPU or a backend without one).
Allocator* pinned_host_allocator(DeviceType type);

// Makes `device` the current device of its backend for the scope (cudaSetDevice), restoring the
// previous one on exit: kernels launch on the current device.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceBackend* backend_ = nullptr;
  int previous_ = 0;
};

}  // namespace tessera
