// The one seam between our CUDA kernels and what runs them. Kernels are written once in CUDA C++
// (cuda/kernels/*.cu) and launched through launch(), never with <<<...>>> directly; shared memory
// is declared through TS_SHARED / TS_DYNAMIC_SHARED. Built with nvcc (TESSERA_CUDA) this is the
// ordinary launch on the GPU; built with the host compiler (TESSERA_CUDA_EMU) the same kernel
// runs on the SIMT emulator (cuda/emu/simt.h), which checks barriers, warp collectives and shared
// memory as it goes.
#pragma once
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessera/core/dispatch.h"
#include "tessera/core/levers.h"
#include "tessera/cuda/runtime.h"

#if defined(TESSERA_CUDA_EMU)
#include "tessera/cuda/emu/simt.h"
// A static shared array of n T's / the dynamic shared memory of the launch, as T*.
#define TS_SHARED(T, name, n) \
  T* name = static_cast<T*>(::tessera::cuda::emu::shared_static(sizeof(T) * (n), alignof(T)))
#define TS_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::tessera::cuda::emu::shared_dynamic())
#else
#define TS_SHARED(T, name, n) __shared__ T name[n]
#define TS_DYNAMIC_SHARED(T, name)                                    \
  extern __shared__ __align__(16) unsigned char ts_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(ts_dynamic_shared_)
#endif

// Before a loop over a register array: fully unrolled, its indices are constants and the array
// stays in registers (an indexed array would go to local memory). The emulator's host compiler
// needs no hint.
#if defined(__CUDACC__)
#define TS_UNROLL _Pragma("unroll")
#else
#define TS_UNROLL
#endif

namespace tessera::cuda {

#if defined(TESSERA_CUDA_EMU) || defined(__CUDACC__)  // kernels are compiled by nvcc or for the emulator
// Launches kernel(args...) on `stream` with `grid` blocks of `block` threads and `shared_bytes`
// of dynamic shared memory. `name` appears in every error the launch reports.
template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
  count_device_launch();
#if defined(TESSERA_CUDA_EMU)
  // The kernel's parameters, converted once as CUDA's parameter buffer would hold them (a graph
  // node keeps that copy); every emulated thread receives its own copies (the kernel takes them by
  // value). The grid runs now, or at each replay of the graph the stream is capturing.
  // As on a GPU, the launch takes the kernel's shared memory attribute as it stands on the current device now.
  const size_t opt_in = emu::dynamic_shared_opt_in(reinterpret_cast<const void*>(kernel));
  emu::enqueue(
      stream,
      [name, kernel, grid, block, shared_bytes, opt_in,
       params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)] {
        auto body = [&] { std::apply(kernel, params); };
        emu::run_grid(
            {name, grid, block, shared_bytes, opt_in}, [](void* b) { (*static_cast<decltype(body)*>(b))(); }, &body);
      },
      name);
#else
  // clang-format 14 takes `>>>` for C++ shifts and splits it, which nvcc refuses.
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  check(cudaGetLastError(), name);
  // A fault inside a kernel (an illegal address) surfaces at some later synchronisation, far from
  // the op that caused it; TESSERA_CUDA_SYNC=1 waits after every launch so the error names it.
  // (Not while the stream captures a graph: nothing runs until the graph does.)
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (levers().synchronous_launches && cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
      capturing == cudaStreamCaptureStatusNone)
    check(cudaStreamSynchronize(stream), name);
#endif
}
#endif

}  // namespace tessera::cuda
