// GEMM plans against argument sets worked out by hand (row-major C = A·B is column-major
// Cᵀ = Bᵀ·Aᵀ: cuBLAS's A is our b, its M our n). Needs no device: runs in every CUDA build. In the
// real build, the plans also become real cuBLASLt descriptors, which needs no GPU either.
#include <catch2/catch.hpp>

#include "tessera/core/backend.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/cuda/plans/gemm_plan.h"
#include "tessera/ops/kernels/linalg.h"
#include "tessera/ops/ops.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

// The plan of a · b with the operands as matmul's front end passes them (expanded to out's batch).
GemmPlan plan_of(const Tensor& a, const Tensor& b, bool bias = false) {
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  Shape out_shape = batch;
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  Shape b_shape = batch;
  b_shape.push_back(b.size(-2));
  b_shape.push_back(b.size(-1));
  return plan_matmul(a, b.expand(b_shape), bias, Tensor::empty(out_shape));
}

GemmCall call(BlasOp ta, BlasOp tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  GemmCall c;
  c.transa = ta;
  c.transb = tb;
  c.m = m;
  c.n = n;
  c.k = k;
  c.lda = lda;
  c.ldb = ldb;
  c.ldc = ldc;
  return c;
}

void check_descriptors(const GemmPlan& plan) {
#if defined(TESSERA_CUDA)
  INFO(plan.str());
  CHECK(check_cublaslt_descriptors(plan) == "");
#else
  (void)plan;
#endif
}

}  // namespace

TEST_CASE("gemm plan: contiguous, transposed and strided operands", "[cuda][plan]") {
  const Tensor a = zeros({2, 3}), b = zeros({3, 4});
  const GemmPlan p = plan_of(a, b);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0] == call(BlasOp::N, BlasOp::N, 4, 2, 3, 4, 3, 4));
  check_descriptors(p);

  // b = w.t() with w [4, 3]: stored [n, k], read column-major it is already bᵀ... transposed: T.
  const GemmPlan pt = plan_of(a, zeros({4, 3}).t());
  CHECK(pt.calls[0] == call(BlasOp::T, BlasOp::N, 4, 2, 3, 3, 3, 4));
  // a = xt.t() with xt [3, 2], and both transposed.
  CHECK(plan_of(zeros({3, 2}).t(), b).calls[0] == call(BlasOp::N, BlasOp::T, 4, 2, 3, 4, 2, 4));
  CHECK(plan_of(zeros({3, 2}).t(), zeros({4, 3}).t()).calls[0] == call(BlasOp::T, BlasOp::T, 4, 2, 3, 3, 2, 4));
  // A narrow of a wider matrix: rows 6 apart.
  const GemmPlan ps = plan_of(zeros({2, 6}).narrow(1, 1, 3), b);
  CHECK(ps.calls[0] == call(BlasOp::N, BlasOp::N, 4, 2, 3, 4, 6, 4));
  CHECK(ps.calls[0].offset_b == 0);  // the view's own offset is in its base pointer
  check_descriptors(pt);
  check_descriptors(ps);
}

TEST_CASE("gemm plan: degenerate matrices keep valid leading dimensions", "[cuda][plan]") {
  CHECK(plan_of(zeros({1, 3}), zeros({3, 4})).calls[0] == call(BlasOp::N, BlasOp::N, 4, 1, 3, 4, 3, 4));
  CHECK(plan_of(zeros({2, 3}), zeros({3, 1})).calls[0] == call(BlasOp::N, BlasOp::N, 1, 2, 3, 1, 3, 1));
  CHECK(plan_of(zeros({2, 1}), zeros({1, 4})).calls[0] == call(BlasOp::N, BlasOp::N, 4, 2, 1, 4, 1, 4));
}

TEST_CASE("gemm plan: batches, broadcast batches and batch dims that do not merge", "[cuda][plan]") {
  GemmCall batched = call(BlasOp::N, BlasOp::N, 4, 2, 3, 4, 3, 4);
  batched.batch = 5;
  batched.stride_a = 12;  // b [5, 3, 4]
  batched.stride_b = 6;   // a [5, 2, 3]
  batched.stride_c = 8;
  const GemmPlan pb = plan_of(zeros({5, 2, 3}), zeros({5, 3, 4}));
  REQUIRE(pb.calls.size() == 1);
  CHECK(pb.calls[0] == batched);
  check_descriptors(pb);

  // A weight shared by the batch: stride 0.
  const GemmPlan shared = plan_of(zeros({5, 2, 3}), zeros({3, 4}));
  batched.stride_a = 0;
  CHECK(shared.calls[0] == batched);
  check_descriptors(shared);

  // Two batch dims merge when they are contiguous with each other in all three operands.
  const GemmPlan merged = plan_of(zeros({2, 3, 2, 3}), zeros({2, 3, 3, 4}));
  REQUIRE(merged.calls.size() == 1);
  CHECK(merged.calls[0].batch == 6);

  // a's batch dims swapped: they cannot merge, so one call per index of the outer one.
  const Tensor a = zeros({3, 2, 2, 3}).permute({1, 0, 2, 3});  // [2, 3, 2, 3], batch strides (6, 12)
  const GemmPlan split = plan_of(a, zeros({2, 3, 3, 4}));
  REQUIRE(split.calls.size() == 2);
  for (int64_t o = 0; o < 2; ++o) {
    const GemmCall& c = split.calls[o];
    CHECK(c.batch == 3);
    CHECK(c.offset_a == o * 36);
    CHECK(c.stride_a == 12);
    CHECK(c.offset_b == o * 6);
    CHECK(c.stride_b == 12);
    CHECK(c.offset_c == o * 24);
    CHECK(c.stride_c == 8);
  }
  check_descriptors(split);
}

TEST_CASE("gemm plan: linear's bias is the epilogue, per output feature", "[cuda][plan]") {
  const GemmPlan p = plan_of(zeros({8, 3}), zeros({5, 3}).t(), true);
  GemmCall want = call(BlasOp::T, BlasOp::N, 5, 8, 3, 3, 3, 5);
  want.epilogue = GemmEpilogue::Bias;
  CHECK(p.calls[0] == want);
  CHECK(p.str().find("+bias") != std::string::npos);
  check_descriptors(p);
  check_descriptors(plan_of(zeros({2, 3}, DType::Float64), zeros({3, 4}, DType::Float64)));
}

TEST_CASE("gemm plan: linear's bias gradient is the weight gradient's BGRADB epilogue", "[cuda][plan]") {
  // dW [5, 3] = g2ᵀ · x for g2 [8 rows, 5 features] and x [8, 3]: a = g2.t() is column-major (ld 5),
  // so cuBLAS's B = g2 read as stored [5, 8] with op T (k = 8 rows, n = 5 features, ldb = 5); its
  // A = x read column-major is xᵀ [3, 8], op N (m = 3, lda = 3); D = dWᵀ [3, 5], ldc = 3. BGRADB
  // sums op(B) [8, 5] over k: one value per column of D, per feature: Σ_rows g2, the bias gradient.
  const Tensor g2 = zeros({8, 5}), x = zeros({8, 3}), gw = Tensor::empty({5, 3});
  const GemmPlan p = plan_matmul(g2.t(), x, false, gw, true);
  GemmCall want = call(BlasOp::N, BlasOp::T, 3, 5, 8, 3, 5, 3);
  want.epilogue = GemmEpilogue::BGradB;
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0] == want);
  CHECK(p.str().find("+bgradb") != std::string::npos);
  check_descriptors(p);
  // Without it, the same call with no epilogue.
  CHECK(plan_matmul(g2.t(), x, false, gw).calls[0] == call(BlasOp::N, BlasOp::T, 3, 5, 8, 3, 5, 3));

  // One row (a 1-d input of linear): g2 [1, 5] makes a = g2.t() [5, 1] row-major with ld 1, op N,
  // k = 1; the sums over one row are the row itself.
  GemmCall one = call(BlasOp::N, BlasOp::N, 3, 5, 1, 3, 1, 3);
  one.epilogue = GemmEpilogue::BGradB;
  CHECK(plan_matmul(zeros({1, 5}).t(), zeros({1, 3}), false, gw, true).calls[0] == one);
  // bfloat16 (autocast): the same call; the gradient vector is D's dtype.
  const GemmPlan half = plan_matmul(zeros({8, 5}, DType::BFloat16).t(), zeros({8, 3}, DType::BFloat16), false,
                                    Tensor::empty({5, 3}, DType::BFloat16), true);
  CHECK(half.calls[0] == want);
  check_descriptors(half);
  // Only for one unbatched product without a bias.
  CHECK_THROWS(plan_matmul(zeros({2, 8, 5}), zeros({2, 5, 3}), false, Tensor::empty({2, 8, 3}), true));
  CHECK_THROWS(plan_matmul(g2.t(), x, true, gw, true));
}

TEST_CASE("gemm plan: attention products on views of a qkv projection are one call after one copy", "[cuda][plan]") {
  // qkv [B, N, 3, h, dh] (B 4, N 5, h 3, dh 2), as the attention layers view it.
  const int64_t B = 4, N = 5, h = 3, dh = 2;
  const Tensor qkv = zeros({B, N, 3, h, dh});
  const auto plan_with_copies = [](const Tensor& a, const Tensor& b, const Tensor& out, size_t copies) {
    // What matmul's front end does on a device (batch_ready): each operand that needs it copied into
    // batch_copy_order's layout.
    const auto operand = [&](const Tensor& x) {
      return needs_batch_copy(x) ? Tensor::empty_in_order(x.shape(), batch_copy_order(x), x.dtype(), x.device()) : x;
    };
    CHECK(static_cast<size_t>(needs_batch_copy(a)) + static_cast<size_t>(needs_batch_copy(b)) == copies);
    const Tensor ac = operand(a), bc = operand(b);
    CHECK(matrix_layout(ac).has_value());
    CHECK(matrix_layout(bc).has_value());
    // The copy keeps the matrix's orientation (it reads and writes along the same dim).
    CHECK(matrix_layout(ac)->transposed == matrix_layout(a)->transposed);
    CHECK(matrix_layout(bc)->transposed == matrix_layout(b)->transposed);
    const GemmPlan copied = plan_matmul(ac, bc, false, out);
    INFO(copied.str());
    CHECK(copied.calls.size() == 1);
    CHECK(copied.calls[0].batch == B * h);
    check_descriptors(copied);
    return plan_matmul(a, b, false, out);
  };
  SECTION("XCA: the map [B, h, dh, dh] times v [B, h, dh, N]") {
    const Tensor v = qkv.permute({2, 0, 3, 4, 1}).select(0, 2);
    const GemmPlan loop = plan_with_copies(zeros({B, h, dh, dh}), v, zeros({B, h, dh, N}), 1);
    // Without the copy: the strided batch over the samples (the larger dim), a call per head.
    CHECK(loop.calls.size() == static_cast<size_t>(h));
    CHECK(loop.calls[0].batch == B);
  }
  SECTION("talking heads: q [B, h, N, dh] times kᵀ, both views") {
    const Tensor t = qkv.permute({2, 0, 3, 1, 4});
    plan_with_copies(t.select(0, 0), t.select(0, 1).transpose(-2, -1), zeros({B, h, N, N}), 2);
  }
  SECTION("class attention: one query against kᵀ") {
    const Tensor t = qkv.permute({2, 0, 3, 1, 4});
    plan_with_copies(zeros({B, h, 1, dh}), t.select(0, 1).transpose(-2, -1), zeros({B, h, 1, N}), 1);
  }
  SECTION("factor attention: softmax(k)ᵀ [B, h, dh, N] times v") {
    const Tensor t = qkv.permute({2, 0, 3, 1, 4});
    plan_with_copies(zeros({B, h, N, dh}).transpose(-1, -2), t.select(0, 2), zeros({B, h, dh, dh}), 1);
  }
  SECTION("a broadcast operand is never copied: the plan loops instead") {
    const Tensor shared = zeros({1, h, dh, dh}).expand({B, h, dh, dh});
    const Tensor v = qkv.permute({2, 0, 3, 4, 1}).select(0, 2);
    CHECK_FALSE(needs_batch_copy(shared));
    CHECK(needs_batch_copy(v));
  }
}

#if defined(TESSERA_CUDA)
TEST_CASE("cuBLASLt handles need a GPU: created where one is usable, refused where none is", "[cuda][plan]") {
  const std::string status = cublaslt_handle_status();
  INFO("cublasLtCreate: " << status);
  if (device_count(DeviceType::CUDA) > 0) CHECK(status == "success");
  else CHECK(status != "success");
}
#endif
