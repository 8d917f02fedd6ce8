// Launch shapes and the grid-stride loop our elementwise-style kernels use. Kernels are written
// for any grid size (each thread strides over the elements), so the launch shape is a performance
// choice: on a GPU enough blocks to fill it; on the emulator a few, so that every thread's loop
// runs several iterations (and the tests exercise the stride) while few fibers are started.
#pragma once
#include <algorithm>
#include <cstdint>

#include "tessera/cuda/launch.h"

namespace tessera::cuda {

constexpr unsigned kBlockThreads = 256;

inline unsigned blocks_for(int64_t n, unsigned threads = kBlockThreads) {
#if defined(TESSERA_CUDA_EMU)
  constexpr int64_t kMaxBlocks = 4;
#else
  constexpr int64_t kMaxBlocks = 16384;
#endif
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, kMaxBlocks));
}

// Kernels that give each row (or channel) to one block and stride over the rows use blocks of
// kRowThreads and at most one block per row.
constexpr unsigned kRowThreads = 256;
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(
      std::min<int64_t>(std::max<int64_t>(rows, 1), blocks_for(rows * kRowThreads, kRowThreads)));
}

}  // namespace tessera::cuda

// for (int64_t i = first; i < n; i += stride) over this thread's share of [0, n).
#define TS_GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
