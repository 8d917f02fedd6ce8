// TS_HOST_DEVICE marks a function that CUDA kernels call as well as host code (the arithmetic
// every device must share bit for bit: Philox draws, half conversions). It is __host__ __device__
// under nvcc and nothing for the host compiler (the SIMT emulator calls it as host code).
#pragma once

#if defined(__CUDACC__)
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif
