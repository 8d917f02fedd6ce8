#include "tessera/core/storage.h"

#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "tessera/core/backend.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

// 64-byte aligned host memory (full cache lines, aligned AVX-512 loads), the raw memory of the CPU's
// caching allocator. A block of 2 MiB or more starts on a 2 MiB boundary and asks for transparent
// huge pages: its first touch then faults once per 2 MiB instead of once per 4 KiB (loading a 756 MB
// checkpoint took 187,000 faults and 0.6 s of kernel time, 0.14 s with huge pages). Only the huge
// pages inside the first 4/5 of the block are asked for: a size class gives its tensor at least
// that much of the block (core/allocator.cpp), and a huge page the tensor only begins would be
// faulted whole, holding memory nobody asked for.
class HostMemory final : public RawMemory {
 public:
  void* allocate(size_t nbytes) override {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t size = (nbytes + 63) / 64 * 64;
    if (size < kHuge) return std::aligned_alloc(64, size);
    // posix_memalign: aligned_alloc's size must be a multiple of the alignment (ASan enforces it).
    void* p = nullptr;
    if (::posix_memalign(&p, kHuge, size) != 0) return nullptr;
    const size_t covered = size / 5 * 4 / kHuge * kHuge;
    if (covered > 0) ::madvise(p, covered, MADV_HUGEPAGE);  // advice: ignored where unsupported
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  std::string name() const override { return "cpu"; }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    free_bytes = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
    total_bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page;
  }
};

// Freed blocks are kept for reuse (core/allocator.h): a training step then costs no page faults
// once it has run. Not under AddressSanitizer, which would take a reused block for valid memory
// and miss a use after free, nor with TESSERA_NO_MEMORY_CACHING=1 (PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING, for valgrind and other memory checkers).
bool cache_host_memory() {
#ifdef __SANITIZE_ADDRESS__
  return false;
#else
  const char* off = std::getenv("TESSERA_NO_MEMORY_CACHING");
  return !(off && std::string(off) == "1");
#endif
}

// Never destroyed: tensors held by other static objects may be freed after this file's statics are.
CachingAllocator& cpu_allocator() {
  static HostMemory* memory = new HostMemory;
  static CachingAllocator* allocator = new CachingAllocator(*memory, nullptr, cache_host_memory());
  return *allocator;
}
std::atomic<int64_t> live_storages{0};
std::atomic<int64_t> allocated_bytes[kNumDeviceTypes] = {};
std::atomic<int64_t> peak_bytes[kNumDeviceTypes] = {};

void count_allocation(DeviceType type, int64_t delta) {
  const int t = static_cast<int>(type);
  const int64_t now = allocated_bytes[t].fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = peak_bytes[t].load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes[t].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
}

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
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
