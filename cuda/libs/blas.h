// Executes GEMM plans (cuda/plans/gemm_plan.h) on a device's stream: with cuBLASLt on a GPU
// (cublaslt_gpu.cpp), with a CPU reference of cuBLASLt's column-major contract in the emulator
// (cublaslt_reference.cpp).
#pragma once
#include <string>

#include "tessera/cuda/plans/gemm_plan.h"
#include "tessera/cuda/runtime.h"

namespace tessera::cuda {

// A plan's device pointers, in cuBLAS's terms: A, B and C (= D) of its calls, and the vector of its
// calls' epilogue: the bias they add (length m) or the bias gradient they write (length n).
struct GemmPointers {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* bias = nullptr;  // GemmEpilogue::Bias
  void* bias_grad = nullptr;   // GemmEpilogue::BGradB
};

// Queues the plan's calls. False, with nothing queued, where the library has no algorithm for a
// bias-gradient epilogue (GemmEpilogue::BGradB) of the plan's shapes: the caller then plans without
// it. (The emulator's reference runs every plan; whether cuBLASLt offers BGRADB for each of our
// shapes only a GPU can say.)
bool run_gemm(const GemmPlan& plan, const GemmPointers& p, cudaStream_t stream, int device);

#if defined(TESSERA_CUDA)
// Builds (and frees) the real cuBLASLt matmul descriptor and matrix layouts of every call of the
// plan, which needs no GPU: "" on success, else the failing call and cuBLAS's status.
std::string check_cublaslt_descriptors(const GemmPlan& plan);
// cuBLASLt's answer to creating a handle here ("success", or why not: without a GPU, "the library
// was not initialized").
std::string cublaslt_handle_status();
#endif

}  // namespace tessera::cuda
