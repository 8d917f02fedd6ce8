// Storage: a reference-counted block of device memory shared by a tensor and all its views.
// It carries the version counter that autograd uses to detect in-place modification of a tensor
// saved for backward: every in-place kernel bumps it, and since views share the Storage they share
// the counter (PyTorch's VariableVersion, kept here for the same reason). It remembers the
// allocator that made it, which takes the memory back.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tessera/core/allocator.h"
#include "tessera/core/device.h"

namespace tessera {

// Bytes held by tensor storages on one device type, now and at the peak since the last reset
// (PyTorch's memory_allocated / max_memory_allocated): what benchmarks report as the memory a
// model needs, free of allocator caching and of the process's code and libraries.
struct MemoryStats {
  int64_t allocated_bytes = 0;
  int64_t peak_bytes = 0;
};
MemoryStats memory_stats(DeviceType type);
void reset_peak_memory(DeviceType type);  // the peak restarts from what is allocated now

// The allocator that serves `device` by default: the built-in host allocator for the CPU, the
// backend's (caching) allocator for a device. Throws naming the device when it is not usable.
Allocator& allocator_for(Device device);

class Storage {
 public:
  Storage(size_t nbytes, Device device);  // from allocator_for(device)
  // From a specific allocator, e.g. pinned host memory for fast transfers (still device cpu).
  Storage(size_t nbytes, Device device, Allocator& allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  Allocator& allocator() const { return *allocator_; }  // the one that made it (pinned or not)
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Number of Storage objects alive in the process (leak tests).
  static int64_t live_count();

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tessera
