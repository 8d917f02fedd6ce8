// CPU matmul kernel: a batch of GEMMs (ops/cpu/gemm.h) over the broadcast batch dims, with an
// optional bias broadcast over the rows (linear's y = x·Wᵀ + b: C starts as the bias, then the
// GEMM accumulates into it with beta = 1, so the bias costs no extra pass over the product). a's
// row sums (a linear layer's bias gradient) are the reduction's, as sum(g, 0) would make them: the
// GEMM library has no epilogue for them, and a pass of our own would cost the same read of g.
// bfloat16 products (autocast) run the bfloat16 GEMM (ops/cpu/gemm_bf16.cpp), the bias its own.
#include <algorithm>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/levers.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/gemm.h"
#include "tessera/ops/kernels/linalg.h"

namespace tessera {

namespace {

// Element offset of every batch entry of t (all dims but the last two), in row-major order of the
// batch index; broadcast dims (stride 0) repeat offsets.
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t nb = t.dim() - 2;
  int64_t count = 1;
  for (int64_t d = 0; d < nb; ++d) count *= t.size(d);
  std::vector<int64_t> off(count);
  Shape idx(nb, 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < count; ++i) {
    off[i] = cur;
    for (int64_t d = nb - 1; d >= 0; --d) {  // odometer step
      cur += t.stride(d);
      if (++idx[d] < t.size(d)) break;
      cur -= t.stride(d) * t.size(d);
      idx[d] = 0;
    }
  }
  return off;
}

template <class T>
void matmul_typed(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  if (out.numel() == 0) return;
  const int64_t batch = out.numel() / (m * n);
  T* c = out.data<T>();
  const MatrixLayout la = *matrix_layout(a), lb = *matrix_layout(b);
  const cpu::GemmDesc desc{la.transposed, lb.transposed, m, n, k, la.ld, lb.ld, n};
  if (bias.defined() && batch == 1 && levers().gemm_row_panels) {
    // A linear layer: the bias added to each panel of rows while it is in cache (ops/cpu/gemm.h).
    const Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>> bv(bias.data<T>(), n);
    cpu::gemm_row_panels<T>(desc, a.data<T>(), b.data<T>(), c, [&](int64_t r0, int64_t r1) {
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(c + r0 * n, r1 - r0, n).rowwise() +=
          bv;
    });
    return;
  }
  T beta = T(0);
  if (bias.defined()) {  // every row of C starts as the bias
    const T* bp = bias.data<T>();
    parallel_for(0, batch * m, std::max<int64_t>(1, 32768 / n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::copy(bp, bp + n, c + r * n);
    });
    beta = T(1);
  }
  const std::vector<int64_t> oa = batch_offsets(a), ob = batch_offsets(b);
  cpu::gemm_batched<T>(desc, batch, T(1), {a.data<T>(), 0, oa.data()}, {b.data<T>(), 0, ob.data()}, beta, {c, m * n});
}

void matmul_bf16(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  if (out.numel() == 0) return;
  const MatrixLayout la = *matrix_layout(a), lb = *matrix_layout(b);
  const cpu::GemmDesc desc{la.transposed, lb.transposed, m, n, k, la.ld, lb.ld, n};
  const std::vector<int64_t> oa = batch_offsets(a), ob = batch_offsets(b);
  cpu::gemm_bf16_batched<BFloat16>(desc, out.numel() / (m * n), {a.data<BFloat16>(), 0, oa.data()},
                                   {b.data<BFloat16>(), 0, ob.data()}, 0.0f, {out.data<BFloat16>(), m * n},
                                   {bias.defined() ? bias.data<BFloat16>() : nullptr});
}

}  // namespace

namespace cpu {

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out, const Tensor& a_row_sums) {
  if (out.dtype() == DType::BFloat16) matmul_bf16(a, b, bias, out);
  else TS_DISPATCH_FLOAT(out.dtype(), "matmul", [&] { matmul_typed<scalar_t>(a, b, bias, out); });
  if (a_row_sums.defined()) sum_rows_by_reduction(a, a_row_sums);
}

}  // namespace cpu

}  // namespace tessera
