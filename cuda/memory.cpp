// Device and pinned memory of the CUDA backend.
#include <memory>

#include "core/error.h"
#include "cuda/device.h"
#include "cuda/per_device.h"

namespace tessera::cuda {

namespace {

// cudaMalloc/cudaFree of one device, whichever device is current when called.
class DeviceMemory final : public RawMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  void* allocate(size_t nbytes) override {
    DeviceGuard guard(Device::cuda(device_));
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky error the failed allocation left
      return nullptr;
    }
    check(status, "cudaMalloc");
    return p;
  }
  void free(void* ptr) override {
    DeviceGuard guard(Device::cuda(device_));
    check(cudaFree(ptr), "cudaFree");
  }
  std::string name() const override { return Device::cuda(device_).str(); }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override {
    DeviceGuard guard(Device::cuda(device_));
    free_bytes = total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
  }

 private:
  int device_;
};

#if defined(TESSERA_CUDA_EMU)
// In the emulator every block handed out is first filled with NaN bytes, cached or not, so a
// kernel that reads an output element it never wrote (or an input another kernel never wrote)
// produces NaN in the tests instead of a plausible stale value.
class PoisoningAllocator final : public Allocator {
 public:
  explicit PoisoningAllocator(std::unique_ptr<Allocator> inner) : inner_(std::move(inner)) {}
  void* allocate(size_t nbytes) override {
    void* p = inner_->allocate(nbytes);
    if (nbytes) check(cudaMemsetAsync(p, 0xFF, nbytes, nullptr), "emulator: poisoning a new block");
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override { inner_->deallocate(ptr, nbytes); }
  AllocatorStats stats() const override { return inner_->stats(); }
  void reset_peak() override { inner_->reset_peak(); }
  void empty_cache() override { inner_->empty_cache(); }

 private:
  std::unique_ptr<Allocator> inner_;
};
#endif

struct PerDeviceMemory {
  std::unique_ptr<DeviceMemory> raw;
  std::unique_ptr<Allocator> allocator;
};

class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    void* p = nullptr;
    check(cudaMallocHost(&p, nbytes ? nbytes : 1), "cudaMallocHost");
    return p;
  }
  void deallocate(void* ptr, size_t) override { check(cudaFreeHost(ptr), "cudaFreeHost"); }
};

}  // namespace

Allocator& device_allocator(int device) {
  static auto* devices = new PerDevice<PerDeviceMemory>;
  return *devices->get(device, [device] {
    auto d = std::make_unique<PerDeviceMemory>();
    d->raw = std::make_unique<DeviceMemory>(device);
    auto caching = std::make_unique<CachingAllocator>(
        *d->raw, [device] { return reinterpret_cast<uintptr_t>(current_stream(device)); });
#if defined(TESSERA_CUDA_EMU)
    d->allocator = std::make_unique<PoisoningAllocator>(std::move(caching));
#else
    d->allocator = std::move(caching);
#endif
    return d;
  }).allocator;
}

Allocator& pinned_allocator() {
  static PinnedAllocator pinned;
  return pinned;
}

Tensor empty_pinned(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, Device::cpu(), pinned_allocator()); }

}  // namespace tessera::cuda
