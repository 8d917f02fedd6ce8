#include "cuda/backend.h"

#include <cuda_runtime.h>

#include <mutex>

#include "core/error.h"
#include "core/storage.h"
#include "ops/kernels/copy.h"

namespace tessera::cuda {

namespace {

void check(cudaError_t status, const char* what) {
  TS_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}

// Plain cudaMalloc/cudaFree. The caching allocator (no allocation in a training step's steady
// state) replaces it in the CUDA backend issue.
class DeviceAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    void* p = nullptr;
    if (nbytes == 0) return nullptr;
    cudaError_t status = cudaMalloc(&p, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      throw Error(detail::concat("cuda allocator: out of memory allocating ", nbytes, " bytes (",
                                 free_bytes, " of ", total, " bytes free)"));
    }
    check(status, "cuda allocator: cudaMalloc");
    return p;
  }
  void deallocate(void* ptr, size_t) override {
    if (ptr) cudaFree(ptr);
  }
};

void host_to_device(const Tensor& src, const Tensor& dst) {
  check(cudaMemcpy(dst.raw_data(), src.raw_data(), src.numel() * src.element_size(), cudaMemcpyHostToDevice),
        "to(cuda): cudaMemcpy host to device");
}

void device_to_host(const Tensor& src, const Tensor& dst) {
  check(cudaMemcpy(dst.raw_data(), src.raw_data(), src.numel() * src.element_size(), cudaMemcpyDeviceToHost),
        "to(cpu): cudaMemcpy device to host");
}

DeviceAllocator device_allocator;

}  // namespace

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cuda backend: cudaGetDeviceCount");
    TS_CHECK(count > 0, "cuda backend: no CUDA device is visible");
    set_allocator(DeviceType::CUDA, &device_allocator);
    to_device_kernel.set(DeviceType::CUDA, host_to_device);
    to_host_kernel.set(DeviceType::CUDA, device_to_host);
  });
}

}  // namespace tessera::cuda
