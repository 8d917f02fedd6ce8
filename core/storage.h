// Storage: a reference-counted block of device memory shared by a tensor and all its views.
// It carries the version counter that autograd uses to detect in-place modification of a tensor
// saved for backward: every in-place kernel bumps it, and since views share the Storage they share
// the counter (PyTorch's VariableVersion, kept here for the same reason).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace tessera {

// Per-device allocator. The CPU one is built in; the CUDA backend installs a caching allocator.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};
void set_allocator(DeviceType type, Allocator* allocator);

// Bytes held by tensor storages on one device type, now and at the peak since the last reset
// (PyTorch's memory_allocated / max_memory_allocated): what benchmarks report as the memory a
// model needs, free of allocator caching and of the process's code and libraries.
struct MemoryStats {
  int64_t allocated_bytes = 0;
  int64_t peak_bytes = 0;
};
MemoryStats memory_stats(DeviceType type);
void reset_peak_memory(DeviceType type);  // the peak restarts from what is allocated now
Allocator& allocator_for(Device device);  // throws if the device type has no allocator

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Number of Storage objects alive in the process (leak tests).
  static int64_t live_count();

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tessera
