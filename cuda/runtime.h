// The CUDA runtime API as the backend's host code sees it: the real one (TESSERA_CUDA) or the
// emulator's stand-in with the same names (TESSERA_CUDA_EMU, cuda/emu/cuda_runtime.h), so the
// allocator, streams and copies are one source for both.
#pragma once
#if defined(TESSERA_CUDA_EMU)
#include "tessera/cuda/emu/cuda_runtime.h"
#else
#include <cuda_runtime.h>
#endif

namespace tessera::cuda {

// Throws tessera::Error "<what>: <CUDA's message> (<error name>)" unless status is cudaSuccess.
void check(cudaError_t status, const char* what);

}  // namespace tessera::cuda
