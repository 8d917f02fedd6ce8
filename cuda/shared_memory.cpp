// Shared memory per block beyond the 48 KB every kernel has (cuda/device.h): the device's limits,
// and the per-kernel opt-in CUDA asks for before a launch that uses more.
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "tessera/core/error.h"
#include "tessera/core/levers.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/per_device.h"

namespace tessera::cuda {

const SharedMemoryLimits& shared_memory_limits(int device) {
  static auto* limits = new PerDevice<SharedMemoryLimits>;
  return limits->get(device, [device] {
    int per_block = 0, opt_in = 0;
    check(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlock, device),
          "cudaDeviceGetAttribute (shared memory per block)");
    check(cudaDeviceGetAttribute(&opt_in, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute (shared memory per block, opted in)");
    return std::make_unique<SharedMemoryLimits>(
        SharedMemoryLimits{static_cast<size_t>(per_block), static_cast<size_t>(opt_in)});
  });
}

size_t block_shared_bytes(int device) {
  const SharedMemoryLimits& limits = shared_memory_limits(device);
  return levers().shared_opt_in ? limits.opt_in : limits.per_block;
}

void opt_in_shared_bytes(const char* name, const void* kernel, size_t bytes) {
  int device = 0;
  check(cudaGetDevice(&device), name);
  const SharedMemoryLimits& limits = shared_memory_limits(device);
  if (bytes <= limits.per_block) return;
  TS_CHECK(bytes <= limits.opt_in, name, ": ", bytes, " bytes of shared memory per block; cuda:", device,
           " gives a block at most ", limits.opt_in);
  // The attribute each (device, kernel) has been given: a kernel is loaded into each device's context
  // on its own, and setting it costs a driver call, not to be made at every launch.
  static std::mutex mutex;
  static auto* given = new std::map<std::pair<int, const void*>, size_t>;
  std::lock_guard<std::mutex> lock(mutex);
  size_t& at = (*given)[{device, kernel}];
  if (bytes <= at) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), name);
  at = bytes;
}

}  // namespace tessera::cuda
