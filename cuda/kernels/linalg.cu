// The CUDA matmul kernel: no kernel of ours, a GEMM plan (cuda/plans/gemm_plan.h) executed by
// cuBLASLt on a GPU or by the emulator's reference of it, on the device's stream.
#include "tessera/cuda/device.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/linalg.h"

namespace tessera::cuda {

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  if (out.numel() == 0) return;
  KernelContext ctx(out);
  const GemmPlan plan = plan_matmul(a, b, bias.defined(), out);
  count_device_launch();  // cuBLASLt's kernel (one, or a split-K pair: counted as one)
  // cuBLAS's A is our b and its B our a (row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ).
  run_gemm(plan, b.device_raw_data(), a.device_raw_data(), bias.defined() ? bias.device_raw_data() : nullptr,
           out.device_raw_data(), ctx.stream, out.device().index);
}

}  // namespace tessera::cuda
