#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

#ifdef TESSERA_WITH_CUDA
#include "cuda/backend.h"
#endif

namespace tessera {

namespace {

// 64-byte aligned host memory: full cache lines and aligned AVX-512 loads for Eigen.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    TS_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

CpuAllocator cpu_allocator;
Allocator* allocators[kNumDeviceTypes] = {&cpu_allocator, nullptr};
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

void set_allocator(DeviceType type, Allocator* allocator) {
  allocators[static_cast<int>(type)] = allocator;
}

Allocator& allocator_for(Device device) {
#ifdef TESSERA_WITH_CUDA
  if (device.is_cuda()) cuda::register_backend();
#endif
  Allocator* a = allocators[static_cast<int>(device.type)];
  TS_CHECK(a != nullptr, "allocate: no allocator for device ", device.str(),
           " (is the CUDA backend compiled in? configure with -DTESSERA_CUDA=ON)");
  return *a;
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator_for(device).allocate(nbytes);
  live_storages.fetch_add(1, std::memory_order_relaxed);
  count_allocation(device.type, static_cast<int64_t>(nbytes));
}

Storage::~Storage() {
  allocator_for(device_).deallocate(data_, nbytes_);
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
