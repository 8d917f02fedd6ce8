// The CUDA matmul kernel: no kernel of ours, a GEMM plan (cuda/plans/gemm_plan.h) executed by
// cuBLASLt on a GPU or by the emulator's reference of it, on the device's stream. An operand whose
// batch dims do not merge (a view of q, k or v) is first copied into a layout whose do, so the
// product is one strided-batch call rather than one call per sample (TESSERA_GEMM_BATCH_COPY=0,
// core/levers.h: no copy, a call per index of the smaller batch dims).
#include "tessera/core/levers.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/ops/kernels/linalg.h"

namespace tessera::cuda {

namespace {

// x itself, or its copy into a layout whose batch dims merge with out's (gemm_plan.h).
Tensor batch_operand(const Tensor& x, const Tensor& out) {
  if (!levers().gemm_batch_copy || !needs_batch_copy(x, out)) return x;
  Tensor dense = Tensor::empty_in_order(x.shape(), batch_copy_order(x), x.dtype(), x.device());
  copy_kernel[x.device()](x, dense);  // through the table: a profiler counts its bytes in this call
  return dense;
}

}  // namespace

void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& bias, const Tensor& out) {
  if (out.numel() == 0) return;
  KernelContext ctx(out);
  const Tensor a = batch_operand(a_in, out), b = batch_operand(b_in, out);
  const GemmPlan plan = plan_matmul(a, b, bias.defined(), out);
  // One cublasLtMatmul per call of the plan (a call may run a split-K pair of kernels: counted as one).
  for (size_t i = 0; i < plan.calls.size(); ++i) count_device_launch(LaunchKind::Library);
  // cuBLAS's A is our b and its B our a (row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ).
  run_gemm(plan, b.device_raw_data(), a.device_raw_data(), bias.defined() ? bias.device_raw_data() : nullptr,
           out.device_raw_data(), ctx.stream, out.device().index);
}

}  // namespace tessera::cuda
