// Reductions across the threads of a warp and of a block, for kernels that reduce rows or
// channels. The order of the additions depends only on blockDim (butterfly within each warp, then
// across the warps' partials), so results are deterministic run to run.
#pragma once
#include "tessera/cuda/launch.h"

namespace tessera::cuda {

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Every lane of a full warp gets op over the 32 lanes' values.
template <class T, class Op>
__device__ T warp_all_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets op over all threads' values. blockDim.x must be a multiple of 32
// (at most 1024), blockDim.y == blockDim.z == 1, and every thread of the block must call it.
// `scratch` is shared memory for 32 values; `identity` is op's neutral element. Calls may follow
// one another with the same scratch (the leading barrier protects it).
template <class T, class Op>
__device__ T block_all_reduce(T v, T* scratch, Op op, T identity) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_all_reduce(v, op);
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_all_reduce(lane < warps ? scratch[lane] : identity, op);
}

}  // namespace tessera::cuda
