// The SIMT emulator's device side: what a kernel written in CUDA C++ sees when the same .cu file
// is compiled by the host compiler (TESSERA_CUDA_EMU). It provides the CUDA built-ins our kernels
// use — threadIdx/blockIdx/blockDim/gridDim, __syncthreads, warp shuffles and votes, atomics,
// shared memory (through the TS_SHARED seam of cuda/launch.h) — with the checks a real GPU does
// not make:
//   - the threads of a block run as fibers, in forward, reverse or shuffled order between
//     barriers (a kernel whose result depends on the order is missing a barrier);
//   - a __syncthreads reached by some live threads of a block but not others, or reached at two
//     different places, is an error, as is a warp collective whose mask names a lane that has
//     exited or waits elsewhere;
//   - shared memory starts filled with NaN (0xFF bytes) in every block, and with AddressSanitizer
//     every byte outside the declared arrays is poisoned;
//   - device memory is host memory, so AddressSanitizer also sees out-of-bounds global accesses.
// Blocks run one after another on the calling thread. The emulator is ours (no dependency); its
// own tests are tests/cuda/test_emulator.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

// The device's limits (kSharedBytesPerBlock...), read before the macros below rename CUDA's built-ins
// (cudaDeviceProp has a field warpSize).
#include "tessera/cuda/emu/cuda_runtime.h"

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

namespace tessera::cuda::emu {

constexpr int kWarpSize = 32;

// The order in which the emulator runs the threads of a block between barriers, and the blocks of
// a grid. Cycle (the default) uses forward, reverse and shuffled in turn from launch to launch, so
// a test suite exercises all three; the environment variable TESSERA_EMU_ORDER (forward, reverse,
// shuffled, cycle) or set_thread_order() fixes one.
enum class ThreadOrder : uint8_t { Forward, Reverse, Shuffled, Cycle };
void set_thread_order(ThreadOrder order);
ThreadOrder thread_order();

struct ThreadInfo {
  dim3 thread_idx, block_idx, block_dim, grid_dim;
  unsigned lane;  // threadIdx's linear index modulo 32
};
// The thread running now (set by the scheduler at every switch). Every threadIdx/blockIdx in a
// kernel reads it, so it uses the initial-exec TLS model: a load at a fixed offset instead of a
// __tls_get_addr call (a seventh of an emulated training step's time with the default model).
// libtessera.so is linked by the programs that use it, never dlopen'ed, which that model needs.
#define TS_EMU_FAST_TLS [[gnu::tls_model("initial-exec")]]
TS_EMU_FAST_TLS inline thread_local const ThreadInfo* current_thread = nullptr;

struct GridConfig {
  const char* kernel;
  dim3 grid, block;
  size_t dynamic_shared_bytes;
  // The kernel's cudaFuncAttributeMaxDynamicSharedMemorySize on its device at the launch, 0 where
  // never set: then its static arrays and dynamic bytes share kSharedBytesPerBlock, as on a GPU.
  size_t dynamic_shared_opt_in = 0;
};

// Runs body(closure) once for every thread of the grid, and returns when all have finished.
// Throws tessera::Error naming the kernel on an invalid configuration or a detected fault.
void run_grid(const GridConfig& config, void (*body)(void*), void* closure);

// Launches so far (the cycle of thread orders advances with it).
uint64_t launch_count();

// ---- called by kernels through the built-ins below ----------------------------------------------
// Reports an emulator-detected fault in the running kernel (throws, ending the launch).
[[noreturn]] void fault(const char* what);
void syncthreads(const std::source_location& where);
// Deposits this lane's 8-byte value, waits until every lane of `mask` (which must contain this
// lane) has deposited, and returns the warp's 32 deposited values (lanes outside mask are unset).
const uint64_t* warp_exchange(unsigned mask, uint64_t value, const char* what, const std::source_location& where);
// Shared memory of the running block: a static array (each thread's n-th declaration gets the same
// block-wide address) and the dynamic region given at launch.
void* shared_static(size_t bytes, size_t alignment);
void* shared_dynamic();

template <class T>
uint64_t to_lane_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <class T>
T from_lane_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

enum class Shuffle : uint8_t { Index, Down, Up, Xor };
constexpr const char* shuffle_name(Shuffle kind) {
  constexpr const char* names[] = {"__shfl_sync", "__shfl_down_sync", "__shfl_up_sync", "__shfl_xor_sync"};
  return names[static_cast<int>(kind)];
}
// The lane a shuffle reads, or this lane itself when CUDA says the value is unchanged. (Inline,
// as the lane below: a block reduction makes ten shuffles per thread.)
inline unsigned shuffle_source(Shuffle kind, unsigned lane, int arg, int width) {
  if (width <= 0 || width > kWarpSize || (width & (width - 1)) != 0)
    fault("warp shuffle width must be a power of two <= 32");
  const unsigned w = static_cast<unsigned>(width), base = lane / w * w, in = lane % w, a = static_cast<unsigned>(arg);
  switch (kind) {
    case Shuffle::Index: return base + a % w;
    case Shuffle::Down: return in + a < w ? lane + a : lane;
    case Shuffle::Up: return in >= a ? lane - a : lane;
    case Shuffle::Xor: break;
  }
  // __shfl_xor_sync: a lane may read from its own or an earlier group of `width` lanes, not a later one.
  const unsigned src = lane ^ a;
  return src / w > lane / w ? lane : src;
}
inline unsigned lane_id() { return current_thread->lane; }

template <class T>
T shuffle(Shuffle kind, unsigned mask, T var, int arg, int width, const std::source_location& where) {
  const uint64_t* lanes = warp_exchange(mask, to_lane_bits(var), shuffle_name(kind), where);
  const unsigned src = shuffle_source(kind, lane_id(), arg, width);
  if (!(mask >> src & 1u)) fault("a warp shuffle reads a lane outside its mask");
  return from_lane_bits<T>(lanes[src]);
}

}  // namespace tessera::cuda::emu

// ---- CUDA's names ------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define threadIdx (::tessera::cuda::emu::current_thread->thread_idx)
#define blockIdx (::tessera::cuda::emu::current_thread->block_idx)
#define blockDim (::tessera::cuda::emu::current_thread->block_dim)
#define gridDim (::tessera::cuda::emu::current_thread->grid_dim)
#define warpSize 32

inline void __syncthreads(const std::source_location& where = std::source_location::current()) {
  ::tessera::cuda::emu::syncthreads(where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       const std::source_location& where = std::source_location::current()) {
  ::tessera::cuda::emu::warp_exchange(mask, 0, "__syncwarp", where);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              const std::source_location& where = std::source_location::current()) {
  return ::tessera::cuda::emu::shuffle(::tessera::cuda::emu::Shuffle::Index, mask, var, src_lane, width, where);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   const std::source_location& where = std::source_location::current()) {
  return ::tessera::cuda::emu::shuffle(::tessera::cuda::emu::Shuffle::Down, mask, var, static_cast<int>(delta), width,
                                       where);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 const std::source_location& where = std::source_location::current()) {
  return ::tessera::cuda::emu::shuffle(::tessera::cuda::emu::Shuffle::Up, mask, var, static_cast<int>(delta), width,
                                       where);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  const std::source_location& where = std::source_location::current()) {
  return ::tessera::cuda::emu::shuffle(::tessera::cuda::emu::Shuffle::Xor, mask, var, lane_mask, width, where);
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              const std::source_location& where = std::source_location::current()) {
  const uint64_t* lanes = ::tessera::cuda::emu::warp_exchange(mask, predicate != 0, "__ballot_sync", where);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && lanes[l]) bits |= 1u << l;
  return bits;
}
inline int __any_sync(unsigned mask, int predicate,
                      const std::source_location& where = std::source_location::current()) {
  return __ballot_sync(mask, predicate, where) != 0;
}
inline int __all_sync(unsigned mask, int predicate,
                      const std::source_location& where = std::source_location::current()) {
  return __ballot_sync(mask, predicate, where) == mask;
}

// Atomics: std::atomic_ref, so they stay correct if blocks ever run on several host threads.
template <class T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <class T>
T atomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value);
}
template <class T>
T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;  // the old value, whether or not it was replaced
}
template <class T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (old < value && !ref.compare_exchange_weak(old, value)) {}
  return old;
}
template <class T>
T atomicMin(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (value < old && !ref.compare_exchange_weak(old, value)) {}
  return old;
}
