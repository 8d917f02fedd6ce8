// Deterministic column sums over the rows of a [rows, C] matrix, for kernels whose gradients sum
// per column (layer norm's weight and bias, LayerScale's gamma, a fused bias). Stage 1, written by
// each kernel for its own expression, adds fixed chunks of kChunkRows rows into double partials
// partial[k·C + c]; stage 2 (below) adds the chunks in order. The result depends on the data only,
// never on the launch shape, and needs no atomics.
#pragma once
#include <cstdint>

#include "tessera/cuda/grid.h"

namespace tessera::cuda {

constexpr int64_t kChunkRows = 64;

inline int64_t row_chunks(int64_t rows) { return rows > 0 ? (rows + kChunkRows - 1) / kChunkRows : 1; }

// out[c] = Σ_k partial[k·C + c], converted to T.
template <class T>
__global__ void sum_column_chunks(const double* partial, int64_t chunks, int64_t C, T* out) {
  TS_GRID_STRIDE_LOOP(c, C) {
    double acc = 0;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * C + c];
    out[c] = static_cast<T>(acc);
  }
}

}  // namespace tessera::cuda
