#include "tessera/ops/kernels/linalg.h"

#include "tessera/core/levers.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/kernels/strided.h"

namespace tessera {

bool needs_batch_copy(const Tensor& x) {
  if (x.dim() < 4) return false;  // at most one batch dim
  const Shape batch(x.shape().begin(), x.shape().end() - 2), sx(x.strides().begin(), x.strides().end() - 2);
  for (size_t d = 0; d < batch.size(); ++d)
    if (batch[d] > 1 && sx[d] == 0) return false;
  // Merged against a contiguous output's batch strides, in the output's (logical) order.
  const Shape out = contiguous_strides(batch);
  return merge_dims<2>(batch, {&out, &sx}).sizes.size() > 1;
}

Shape batch_copy_order(const Tensor& x) {
  // Any strides in the wanted order will do: empty_in_order keeps only their order.
  const int64_t dims = x.dim();
  Shape order(static_cast<size_t>(dims));
  for (int64_t d = 0; d < dims - 2; ++d) order[d] = dims - d + 1;  // batch dims: dims + 1 down to 4
  const auto layout = matrix_layout(x);
  const bool column_major = layout && layout->transposed;
  order[dims - 2] = column_major ? 2 : 3;  // rows
  order[dims - 1] = column_major ? 3 : 2;  // cols
  return order;
}

Tensor batch_ready(const Tensor& x) {
  if (x.device().is_cpu() || !levers().gemm_batch_copy || !needs_batch_copy(x)) return x;
  Tensor dense = Tensor::empty_in_order(x.shape(), batch_copy_order(x), x.dtype(), x.device());
  copy_kernel[x.device()](x, dense);
  return dense;
}

void sum_rows_by_reduction(const Tensor& a, const Tensor& a_row_sums) {
  reduce_kernel[a.device()](ReduceOp::Sum, a.t(), {0}, a_row_sums.view({1, a.size(0)}));
}

}  // namespace tessera
