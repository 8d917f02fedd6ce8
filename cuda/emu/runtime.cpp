// The emulated CUDA runtime (see cuda_runtime.h).
#include "tessera/cuda/emu/cuda_runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  const long long n = std::atoll(v);
  return n > 0 ? static_cast<size_t>(n) : fallback;
}

int configured_devices() { return static_cast<int>(env_size("TESSERA_EMU_DEVICES", 1)); }
size_t configured_capacity() { return env_size("TESSERA_EMU_MEMORY_MB", 16384) << 20; }

struct Allocation {
  size_t bytes;
  int device;  // -1: pinned host memory
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  std::vector<size_t> used;
  size_t capacity = configured_capacity();
  State() : used(static_cast<size_t>(configured_devices()), 0) {}
};

// Never destroyed: tensors freed by static destructors at exit still find their allocations.
State& state() {
  static State* s = new State;
  return *s;
}

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

// The allocation of `kind` (a device index, or -1 for pinned host) that holds [p, p + bytes), if any.
const Allocation* find(const void* p, size_t bytes, bool device) {
  State& s = state();
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocations.upper_bound(addr);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  if ((a.device >= 0) != device) return nullptr;
  return addr + bytes <= it->first + a.bytes ? &a : nullptr;
}

bool in_device_memory(const void* p, size_t bytes) { return find(p, bytes, true) != nullptr; }

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    const bool dst_dev = in_device_memory(dst, bytes), src_dev = in_device_memory(src, bytes);
    bool ok = true;
    switch (kind) {
      case cudaMemcpyHostToHost: ok = !dst_dev && !src_dev; break;
      case cudaMemcpyHostToDevice: ok = dst_dev && !src_dev; break;
      case cudaMemcpyDeviceToHost: ok = !dst_dev && src_dev; break;
      case cudaMemcpyDeviceToDevice: ok = dst_dev && src_dev; break;
      case cudaMemcpyDefault: break;
      default: return fail(cudaErrorInvalidMemcpyDirection);
    }
    if (!ok) return fail(cudaErrorInvalidValue);
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

}  // namespace

struct EmuStream {
  int device;
};
struct EmuEvent {
  int unused = 0;
};

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = static_cast<int>(state().used.size());
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= static_cast<int>(state().used.size())) return fail(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= static_cast<int>(state().used.size())) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "Tessera SIMT emulator", sizeof prop->name - 1);
  prop->totalGlobalMem = state().capacity;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->multiProcessorCount = 4;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  State& s = state();
  const size_t rounded = std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.used[current_device] + rounded > s.capacity) return fail(cudaErrorMemoryAllocation);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) return fail(cudaErrorMemoryAllocation);
  std::memset(p, 0xFF, rounded);  // NaN bytes: reading memory no kernel wrote shows up in results
  s.allocations.emplace(reinterpret_cast<uintptr_t>(p), Allocation{rounded, current_device});
  s.used[current_device] += rounded;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end() || it->second.device < 0) return fail(cudaErrorInvalidDevicePointer);
  s.used[it->second.device] -= it->second.bytes;
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return fail(cudaErrorMemoryAllocation);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations.emplace(reinterpret_cast<uintptr_t>(p), Allocation{rounded, -1});
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end() || it->second.device >= 0) return fail(cudaErrorInvalidValue);
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *total_bytes = s.capacity;
  *free_bytes = s.capacity - std::min(s.capacity, s.used[current_device]);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return copy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return copy(dst, src, bytes, kind);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!in_device_memory(ptr, bytes)) return fail(cudaErrorInvalidValue);
  }
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = new EmuStream{current_device};
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new EmuEvent;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }

namespace tessera::cuda::emu {
void set_device_memory_capacity(size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.capacity = bytes ? bytes : configured_capacity();
}
}  // namespace tessera::cuda::emu
