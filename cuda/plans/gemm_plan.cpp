#include "tessera/cuda/plans/gemm_plan.h"

#include <algorithm>

#include "tessera/core/error.h"
#include "tessera/core/autocast.h"
#include "tessera/ops/kernels/linalg.h"
#include "tessera/ops/kernels/strided.h"

namespace tessera::cuda {

namespace {

const char* op_name(BlasOp op) { return op == BlasOp::N ? "N" : "T"; }

const char* epilogue_suffix(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::Bias: return " +bias";
    case GemmEpilogue::BGradB: return " +bgradb";
    case GemmEpilogue::None: break;
  }
  return "";
}

// Shape and strides of t's batch dims (all but the last two).
Shape batch_part(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

}  // namespace

std::string GemmCall::str() const {
  return detail::concat("gemm(", op_name(transa), op_name(transb), " m=", m, " n=", n, " k=", k, " lda=", lda,
                        " ldb=", ldb, " ldc=", ldc, " batch=", batch, " strides=", stride_a, "/", stride_b, "/",
                        stride_c, " offsets=", offset_a, "/", offset_b, "/", offset_c, epilogue_suffix(epilogue), ")");
}

std::string GemmPlan::str() const {
  std::string s = dtype_name(dtype);
  s.append(tf32 ? " (tf32):" : ":");
  for (const GemmCall& c : calls) s.append(" ").append(c.str());
  return s;
}

GemmPlan plan_matmul(const Tensor& a, const Tensor& b, bool bias, const Tensor& out, bool a_row_sums) {
  const int64_t rows = out.size(-2), cols = out.size(-1), depth = a.size(-1);
  const auto la = matrix_layout(a), lb = matrix_layout(b);
  TS_CHECK(la && lb,
           "matmul (cuda): an operand has no BLAS layout (internal error: the front end makes it contiguous)");
  TS_CHECK(!a_row_sums || (a.dim() == 2 && b.dim() == 2 && !bias),
           "matmul (cuda): a's row sums are planned for one unbatched product without a bias (internal error)");
  GemmCall base;
  base.m = cols;
  base.n = rows;
  base.k = depth;
  base.transa = lb->transposed ? BlasOp::T : BlasOp::N;
  base.transb = la->transposed ? BlasOp::T : BlasOp::N;
  // Leading dimensions must cover the stored rows even where a degenerate (1-row or 1-column)
  // matrix makes the stride meaningless.
  const int64_t rows_a = base.transa == BlasOp::N ? base.m : base.k;
  const int64_t rows_b = base.transb == BlasOp::N ? base.k : base.n;
  base.lda = std::max({lb->ld, rows_a, int64_t{1}});
  base.ldb = std::max({la->ld, rows_b, int64_t{1}});
  base.ldc = std::max<int64_t>(cols, 1);
  base.epilogue = bias ? GemmEpilogue::Bias : a_row_sums ? GemmEpilogue::BGradB : GemmEpilogue::None;

  GemmPlan plan;
  plan.dtype = out.dtype();
  plan.tf32 = plan.dtype == DType::Float32 && allow_tf32();
  // Batch dims, merged over the three operands: at most one strided batch per call, over the
  // largest merged dim; the other merged dims are looped over.
  const Shape batch = batch_part(out.shape());
  const Shape sa = batch_part(a.strides()), sb = batch_part(b.strides()), sc = batch_part(out.strides());
  // In cuBLAS order (A = b, B = a), walked in the output's order.
  const MergedDims<3> m = merge_dims<3>(batch, {&sb, &sa, &sc}, 2);
  const size_t strided = static_cast<size_t>(std::max_element(m.sizes.begin(), m.sizes.end()) - m.sizes.begin());
  const int64_t inner = m.sizes[strided];
  int64_t outer = 1;
  for (size_t d = 0; d < m.sizes.size(); ++d)
    if (d != strided) outer *= m.sizes[d];
  for (int64_t o = 0; o < outer; ++o) {
    GemmCall c = base;
    for (int64_t d = static_cast<int64_t>(m.sizes.size()) - 1, rest = o; d >= 0; --d) {
      if (d == static_cast<int64_t>(strided)) continue;
      const int64_t i = rest % m.sizes[d];
      rest /= m.sizes[d];
      c.offset_a += i * m.strides[0][d];
      c.offset_b += i * m.strides[1][d];
      c.offset_c += i * m.strides[2][d];
    }
    c.batch = inner;
    c.stride_a = inner > 1 ? m.strides[0][strided] : 0;
    c.stride_b = inner > 1 ? m.strides[1][strided] : 0;
    c.stride_c = inner > 1 ? m.strides[2][strided] : 0;
    plan.calls.push_back(c);
  }
  return plan;
}

}  // namespace tessera::cuda
