// The CUDA matmul kernel: no kernel of ours, a GEMM plan (cuda/plans/gemm_plan.h) executed by
// cuBLASLt on a GPU or by the emulator's reference of it, on the device's stream. (An operand whose
// batch dims do not merge reaches it copied by the op's front end, batch_ready in
// ops/kernels/linalg.h, so the plan is one call; otherwise the plan loops.) A linear layer's bias
// gradient, asked for as a's row sums, is the weight-gradient GEMM's BGRADB epilogue (lever
// TESSERA_BIAS_GRAD_EPILOGUE), so the backward reads its incoming gradient once less.
#include "tessera/core/levers.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/ops/kernels/linalg.h"

namespace tessera::cuda {

namespace {

// Queues the plan's calls, counted as one library launch each (a call may run a split-K pair of
// kernels: counted as one); false where run_gemm does not run it.
bool queue(const GemmPlan& plan, const GemmPointers& p, const KernelContext& ctx, int device) {
  if (!run_gemm(plan, p, ctx.stream, device)) return false;
  for (size_t i = 0; i < plan.calls.size(); ++i) count_device_launch(LaunchKind::Library);
  return true;
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out, const Tensor& a_row_sums) {
  KernelContext ctx(out);
  bool summed = false;
  if (out.numel() > 0) {
    // cuBLAS's A is our b and its B our a (row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ).
    const GemmPointers p{b.device_raw_data(), a.device_raw_data(), out.device_raw_data(),
                         bias.defined() ? bias.device_raw_data() : nullptr,
                         a_row_sums.defined() ? a_row_sums.device_raw_data() : nullptr};
    const int device = out.device().index;
    summed = a_row_sums.defined() && levers().bias_grad_epilogue &&
             queue(plan_matmul(a, b, bias.defined(), out, true), p, ctx, device);
    if (!summed) queue(plan_matmul(a, b, bias.defined(), out), p, ctx, device);
  }
  if (a_row_sums.defined() && !summed) sum_rows_by_reduction(a, a_row_sums);
}

}  // namespace tessera::cuda
