// Deterministic reductions of a contiguous [outer, kept, inner] tensor over its outer and inner
// dims, to `kept` values, split across many blocks: a reduction to a few outputs over many values
// (a convolution's bias gradient: 16-24 channels of CoaT's CRPE over ~400k values each; talking
// heads' bias gradient: 8 heads over B·N² values) would otherwise give each output one block and
// leave the rest of the GPU idle. Stage 1 gives each block one fixed chunk of one output's values
// (a range of its outer·inner positions, read in order) and writes the chunk's result in double;
// stage 2 combines each output's chunks in order. The chunks depend on the shape alone, so the
// result does too (no atomics, reproducible run to run).
#pragma once
#include <algorithm>
#include <cstdint>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/grid.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

// Values per chunk: kMinChunk or more, so that a block's share is worth its launch, and at most 1024
// chunks per output, so that stage 2 stays short.
constexpr int64_t kMinChunk = 4096;
inline int64_t middle_chunk(int64_t per_output) { return std::max<int64_t>(kMinChunk, (per_output + 1023) / 1024); }

// partial[m·chunks + k] = op over chunk k of output m's values, converted from S to double.
template <class S, class Op>
__global__ void reduce_middle_chunks(const S* x, int64_t outer, int64_t kept, int64_t inner, int64_t chunk,
                                     int64_t chunks, Op op, double identity, double* partial) {
  TS_SHARED(double, scratch, 32);
  const int64_t per_output = outer * inner;
  for (int64_t b = blockIdx.x; b < kept * chunks; b += gridDim.x) {
    const int64_t m = b / chunks, k = b - m * chunks;
    const int64_t end = std::min(per_output, (k + 1) * chunk);
    double acc = identity;
    for (int64_t j = k * chunk + threadIdx.x; j < end; j += blockDim.x) {
      const int64_t a = j / inner, i = j - a * inner;
      acc = op(acc, convert::to_double(x[(a * kept + m) * inner + i]));
    }
    acc = block_all_reduce(acc, scratch, op, identity);
    if (threadIdx.x == 0) partial[b] = acc;
  }
}

// out[m] = op over k of partial[m·chunks + k], in order, converted to O.
template <class O, class Op>
__global__ void combine_middle_chunks(const double* partial, int64_t kept, int64_t chunks, Op op, double identity,
                                      O* out) {
  TS_GRID_STRIDE_LOOP(m, kept) {
    double acc = identity;
    for (int64_t k = 0; k < chunks; ++k) acc = op(acc, partial[m * chunks + k]);
    out[m] = convert::from_double<O>(acc);
  }
}

// The two stages on `stream`; `partial` holds kept · chunks doubles (chunks: middle_chunks()).
inline int64_t middle_chunks(int64_t outer, int64_t inner) {
  const int64_t per_output = outer * inner;
  return std::max<int64_t>(1, (per_output + middle_chunk(per_output) - 1) / middle_chunk(per_output));
}
template <class S, class O, class Op>
void launch_middle_reduction(cudaStream_t stream, const S* x, int64_t outer, int64_t kept, int64_t inner, Op op,
                             double identity, double* partial, O* out) {
  const int64_t chunks = middle_chunks(outer, inner);
  launch("reduce_middle_chunks", reduce_middle_chunks<S, Op>, row_blocks(kept * chunks), kRowThreads, 0, stream, x,
         outer, kept, inner, middle_chunk(outer * inner), chunks, op, identity, partial);
  launch("combine_middle_chunks", combine_middle_chunks<O, Op>, blocks_for(kept), kBlockThreads, 0, stream, partial,
         kept, chunks, op, identity, out);
}

}  // namespace tessera::cuda
