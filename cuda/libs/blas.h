// Executes GEMM plans (cuda/plans/gemm_plan.h) on a device's stream: with cuBLASLt on a GPU
// (cublaslt_gpu.cpp), with a CPU reference of cuBLASLt's column-major contract in the emulator
// (cublaslt_reference.cpp). Pointers are in cuBLAS's terms: A, B, C of the plan's calls, bias of
// length m (or null).
#pragma once
#include <string>

#include "tessera/cuda/plans/gemm_plan.h"
#include "tessera/cuda/runtime.h"

namespace tessera::cuda {

void run_gemm(const GemmPlan& plan, const void* A, const void* B, const void* bias, void* C, cudaStream_t stream,
              int device);

#if defined(TESSERA_CUDA)
// Builds (and frees) the real cuBLASLt matmul descriptor and matrix layouts of every call of the
// plan, which needs no GPU: "" on success, else the failing call and cuBLAS's status.
std::string check_cublaslt_descriptors(const GemmPlan& plan);
// cuBLASLt's answer to creating a handle here ("success", or why not: without a GPU, "the library
// was not initialized").
std::string cublaslt_handle_status();
#endif

}  // namespace tessera::cuda
