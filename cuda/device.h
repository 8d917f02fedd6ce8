// The CUDA backend's device state, for the backend's own code (kernels, copies, library calls):
// the stream work is queued on, memory, and the records through which kernels report bad values.
//
// Streams: each device has one stream on which Tessera queues all its work (created on first use,
// non-blocking with respect to the legacy default stream), so kernels and copies of one device run
// in the order they were issued and the host never waits unless it reads a result.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tessera/core/backend.h"
#include "tessera/core/tensor.h"
#include "tessera/cuda/runtime.h"
#include "tessera/ops/kernels/checks.h"

namespace tessera::cuda {

cudaStream_t current_stream(int device);

// Host-to-device copies on a side stream of the device (cuda/side_copy.cpp; DeviceBackend's
// copy_beside and wait_beside, ops/upload.h).
std::shared_ptr<void> copy_beside(const Tensor& src, const Tensor& dst);
void wait_beside(const std::shared_ptr<void>& copy);

// The caching allocator of a device (core/allocator.h over cudaMalloc), and page-locked host
// memory, from which host-to-device copies run asynchronously (cached too: a freed buffer is
// reused only after the copies queued from it have completed).
Allocator& device_allocator(int device);
// The caching allocator under device_allocator (the emulator wraps it), for graphs' private pools.
CachingAllocator& caching_allocator(int device);
Allocator& pinned_allocator();
// A host (cpu) tensor in pinned memory.
Tensor empty_pinned(const Shape& shape, DType dtype = DType::Float32);

// What a kernel launch needs: the device made current for the scope and its stream.
struct KernelContext {
  explicit KernelContext(const Tensor& on) : guard(on.device()), stream(current_stream(on.device().index)) {}
  DeviceGuard guard;
  cudaStream_t stream;
};

// ---- shared memory per block ----------------------------------------------------------------------
// Every kernel may give a block `per_block` bytes of shared memory (48 KB); one that needs more opts
// in on each device, up to `opt_in` (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KB on an H100 or
// H200). Asked once per device and kept.
struct SharedMemoryLimits {
  size_t per_block, opt_in;
};
const SharedMemoryLimits& shared_memory_limits(int device);
// What a block of the kernels that size their tiles by shared memory (talking_heads_attention's) may
// use on `device`: the opt-in limit, or `per_block` with TESSERA_SHARED_OPT_IN=0 (core/levers.h).
// DeviceBackend::block_shared_memory, from which the ops' front ends size the same tiles.
size_t block_shared_bytes(int device);
// Lets `kernel` launch on the current device with `bytes` of dynamic shared memory: beyond
// `per_block`, sets its cudaFuncAttributeMaxDynamicSharedMemorySize to `bytes` once per device (again
// only for a larger launch), before the launch that needs it; throws naming `name` beyond `opt_in`.
void opt_in_shared_bytes(const char* name, const void* kernel, size_t bytes);
template <class... Params>
void opt_in_shared_bytes(const char* name, void (*kernel)(Params...), size_t bytes) {
  opt_in_shared_bytes(name, reinterpret_cast<const void*>(kernel), bytes);
}

// The device pointer of an optional operand (weight, bias, per-sample scale), or null.
template <class T>
T* device_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.device_data<T>() : nullptr;
}

// ---- data-dependent checks in kernels (ops/kernels/checks.h) ------------------------------------
// A kernel that finds a bad value claims the device's record (the first claim wins) and writes the
// check's id, the value and its position; the host reads the record at the next synchronisation
// and throws the check's message.
struct CheckRecord {
  unsigned int claimed;
  int check;
  long long value;
  long long position;
};
// Registers `check` for the next synchronisation of `device`; returns its id and the record.
CheckRecord* begin_check(int device, const RangeCheck& check, int& id);
// Called after every synchronisation: throws the message of a failed check, if one failed.
void raise_failed_checks(int device);
// For graphs: the id the next check will get, the checks issued from id `first` on, and issuing
// such checks again (a replay runs their kernels again, writing the same record).
int next_check_id(int device);
std::map<int, RangeCheck> checks_since(int device, int first);
void reissue_checks(int device, const std::map<int, RangeCheck>& checks);

// Waits for the device's stream, then reports failed checks.
void synchronize_device(int device);

}  // namespace tessera::cuda
