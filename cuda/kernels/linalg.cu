// The CUDA matmul kernel: no kernel of ours, a GEMM plan (cuda/plans/gemm_plan.h) executed by
// cuBLASLt on a GPU or by the emulator's reference of it, on the device's stream. (An operand whose
// batch dims do not merge reaches it copied by the op's front end, batch_ready in
// ops/kernels/linalg.h, so the plan is one call; otherwise the plan loops.)
#include "tessera/cuda/device.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/ops/kernels/linalg.h"

namespace tessera::cuda {

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  if (out.numel() == 0) return;
  KernelContext ctx(out);
  const GemmPlan plan = plan_matmul(a, b, bias.defined(), out);
  // One cublasLtMatmul per call of the plan (a call may run a split-K pair of kernels: counted as one).
  for (size_t i = 0; i < plan.calls.size(); ++i) count_device_launch(LaunchKind::Library);
  // cuBLAS's A is our b and its B our a (row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ).
  run_gemm(plan, b.device_raw_data(), a.device_raw_data(), bias.defined() ? bias.device_raw_data() : nullptr,
           out.device_raw_data(), ctx.stream, out.device().index);
}

}  // namespace tessera::cuda
