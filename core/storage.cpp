#include "tessera/core/storage.h"

#include <cstdlib>

#include "tessera/core/backend.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

// 64-byte aligned host memory: full cache lines and aligned AVX-512 loads for Eigen.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    TS_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", format_bytes(static_cast<int64_t>(nbytes)));
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

CpuAllocator cpu_allocator;
std::atomic<int64_t> live_storages{0};
std::atomic<int64_t> allocated_bytes[kNumDeviceTypes] = {};
std::atomic<int64_t> peak_bytes[kNumDeviceTypes] = {};

void count_allocation(DeviceType type, int64_t delta) {
  const int t = static_cast<int>(type);
  const int64_t now = allocated_bytes[t].fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = peak_bytes[t].load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes[t].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator;
  return backend_for(device).allocator(device.index);
}

Storage::Storage(size_t nbytes, Device device) : Storage(nbytes, device, allocator_for(device)) {}

Storage::Storage(size_t nbytes, Device device, Allocator& allocator)
    : nbytes_(nbytes), device_(device), allocator_(&allocator) {
  data_ = allocator_->allocate(nbytes);
  live_storages.fetch_add(1, std::memory_order_relaxed);
  count_allocation(device.type, static_cast<int64_t>(nbytes));
}

Storage::~Storage() {
  allocator_->deallocate(data_, nbytes_);
  live_storages.fetch_sub(1, std::memory_order_relaxed);
  count_allocation(device_.type, -static_cast<int64_t>(nbytes_));
}

int64_t Storage::live_count() { return live_storages.load(); }

MemoryStats memory_stats(DeviceType type) {
  const int t = static_cast<int>(type);
  return {allocated_bytes[t].load(), peak_bytes[t].load()};
}

void reset_peak_memory(DeviceType type) {
  const int t = static_cast<int>(type);
  peak_bytes[t].store(allocated_bytes[t].load());
}

}  // namespace tessera
