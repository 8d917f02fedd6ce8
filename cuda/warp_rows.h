// Short rows, a warp each: softmax and layer norm over rows of at most kWarpRowMax values (CaiT's
// 196-wide attention rows, XCiT's d_h-wide maps, every model's LayerNorm over 192-768 channels).
// A block per row leaves most of a 256-thread block idle on such rows and pays two block barriers
// per reduction; a warp per row keeps the row in registers (P values per lane, value i at lane
// i % 32, slot i / 32), reduces it by shuffles alone, and a block of kBlockThreads takes eight rows
// at a time. P is the fewest of 4, 8, 16, 32 that hold the row: registers grow with P (a kernel
// sized for 1,024 values took 95-175 of them, which leaves an SM one block of eight warps). Used where levers().warp_rows is on (core/levers.h); the block-per-row
// kernels stay for longer rows and for the lever's off position.
#pragma once
#include <cstdint>

#include "tessera/core/levers.h"
#include "tessera/cuda/grid.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

constexpr int64_t kWarpRowMax = 1024;

// Whether rows of n values take the warp-per-row kernels.
inline bool warp_rows(int64_t n) { return levers().warp_rows && n <= kWarpRowMax; }

// A grid for `rows` warp rows: one block per kBlockThreads / 32 rows, capped as blocks_for caps.
inline unsigned warp_row_blocks(int64_t rows) { return blocks_for(rows * 32, kBlockThreads); }

// The first row of this thread's warp and the stride to its next row, over a grid of
// warp_row_blocks(...) blocks of kBlockThreads threads. Every lane of a warp gets the same rows, so
// a warp's shuffles always find all 32 lanes.
#define TS_WARP_ROW_LOOP(row, rows)                                                                         \
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < (rows); \
       row += static_cast<int64_t>(gridDim.x) * (blockDim.x / 32))

// Calls f.template operator()<P>() with the fewest values per lane P (4, 8, 16 or 32) that hold a
// row of n <= kWarpRowMax values.
template <class F>
void with_values_per_lane(int64_t n, F&& f) {
  if (n <= 4 * 32) f.template operator()<4>();
  else if (n <= 8 * 32) f.template operator()<8>();
  else if (n <= 16 * 32) f.template operator()<16>();
  else f.template operator()<32>();
}

// v[j] = row[lane + 32·j] as A for the row's n values, `pad` past its end (so a reduction over all
// slots needs no bound check: -inf for a maximum, 0 for a sum). Fully unrolled (TS_UNROLL), so that
// the row stays in registers.
template <class S, class A, int P>
__device__ void load_warp_row(const S* row, int64_t n, unsigned lane, A pad, A (&v)[P]) {
  TS_UNROLL
  for (int j = 0; j < P; ++j) {
    const int64_t i = lane + 32 * static_cast<int64_t>(j);
    v[j] = i < n ? convert::convert<S, A>(row[i]) : pad;
  }
}

}  // namespace tessera::cuda
