// matmul and linear: values against a naive triple loop for every rank combination (1-D
// promotion, broadcast batch dims, transposed and non-BLAS-layout operands, GEMMs large enough to
// be cut into threaded panels) and error messages. The float64 gradient checks are samples of the
// op table, tests/op_samples/linalg.cpp.
#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// torch.matmul by definition: promote 1-D operands, broadcast the batch dims, one dot product per
// output element, then drop the promoted dims.
Tensor reference_matmul(const Tensor& a, const Tensor& b) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "reference");
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  // Flat index of batch entry `i` of `batch` inside an operand batch shape that broadcasts to it.
  auto source = [&](int64_t i, const Shape& own) {
    int64_t flat = 0, scale = 1;
    for (size_t d = 0; d < own.size(); ++d) {
      const size_t bd = batch.size() - 1 - d, od = own.size() - 1 - d;
      int64_t stride_out = 1;
      for (size_t e = bd + 1; e < batch.size(); ++e) stride_out *= batch[e];
      const int64_t coord = (i / stride_out) % batch[bd];
      flat += (own[od] == 1 ? 0 : coord) * scale;
      scale *= own[od];
    }
    return flat;
  };
  const int64_t count = numel_of(batch);
  std::vector<double> out(count * m * n, 0.0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t ia = source(i, ba), ib = source(i, bb);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += av[(ia * m + r) * k + p] * bv[(ib * k + p) * n + c];
        out[(i * m + r) * n + c] = s;
      }
  }
  Shape shape = batch;
  if (a.dim() > 1) shape.push_back(m);
  if (b.dim() > 1) shape.push_back(n);
  return from_vector(out, shape);
}

Tensor random(const Shape& shape, uint64_t seed, DType dtype = DType::Float64) {
  Generator gen(seed);
  return randn(shape, dtype, &gen);
}

struct MatmulCase {
  Shape a, b, out;
};

}  // namespace

TEST_CASE("matmul matches the naive product for every rank combination", "[linalg]") {
  const std::vector<MatmulCase> cases = {
      {{4}, {4}, {}},                           // dot
      {{3, 4}, {4}, {3}},                       // matrix · vector
      {{4}, {4, 5}, {5}},                       // vector · matrix
      {{3, 4}, {4, 5}, {3, 5}},                 // plain GEMM
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},           // batch folded into the rows
      {{2, 3, 4}, {4}, {2, 3}},                 // batched matrix · vector
      {{4}, {2, 4, 5}, {2, 5}},                 // vector · batched matrix
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},           // matrix broadcast over b's batch
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},        // same batch
      {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},  // batch dims broadcast against each other
      {{1, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{3, 0}, {0, 2}, {3, 2}},  // empty inner dim: zeros
      {{0, 3}, {3, 2}, {0, 2}},
  };
  for (const MatmulCase& c : cases) {
    INFO("a " << shape_str(c.a) << " b " << shape_str(c.b));
    Tensor a = random(c.a, 1), b = random(c.b, 2);
    Tensor y = matmul(a, b);
    CHECK(y.shape() == c.out);
    CHECK(max_abs_diff(y, reference_matmul(a, b)) < 1e-12);
  }
}

TEST_CASE("matmul reads transposed and strided operands correctly", "[linalg]") {
  Tensor q = random({2, 3, 5, 4}, 3), k = random({2, 3, 6, 4}, 4);
  // q · kᵀ as in attention: the transposed view reaches the GEMM as a transpose flag.
  Tensor kt = k.transpose(-2, -1);
  CHECK(max_abs_diff(matmul(q, kt), reference_matmul(q, kt.contiguous())) < 1e-12);
  // Both operands transposed, and a transposed lhs with a broadcast batch.
  Tensor at = random({2, 3, 4, 5}, 5).transpose(-2, -1), bt = random({3, 6, 4}, 6).transpose(-2, -1);
  CHECK(max_abs_diff(matmul(at, bt), reference_matmul(at.contiguous(), bt.contiguous())) < 1e-12);
  // Neither dim unit-stride (a step-2 slice): the operand is copied first.
  Tensor s = random({5, 8}, 7).slice(1, 0, 8, 2);
  Tensor m = random({4, 3}, 8);
  CHECK(max_abs_diff(matmul(s, m), reference_matmul(s.contiguous(), m)) < 1e-12);
  // An expanded (stride-0) batch and a non-contiguous batch dim.
  Tensor e = random({1, 3, 4}, 9).expand({5, 3, 4});
  Tensor p = random({4, 5, 2}, 10).permute({1, 0, 2});
  CHECK(max_abs_diff(matmul(e, p), reference_matmul(e.contiguous(), p.contiguous())) < 1e-12);
}

TEST_CASE("large matmuls split into threaded panels agree with the reference", "[linalg]") {
  // One big GEMM (row panels; one multithreaded oneDNN call in float32), a wide one (column
  // panels), an odd batch (panels per entry; oneDNN calls one after the other), a batch of entries
  // shared by the threads (one single-threaded oneDNN call each) and a large batch of small GEMMs
  // (Eigen's in both dtypes); float32 against the float64 reference.
  const std::vector<MatmulCase> cases = {
      {{300, 70}, {70, 90}, {300, 90}},          {{40, 70}, {70, 260}, {40, 260}},
      {{3, 130, 50}, {3, 50, 70}, {3, 130, 70}}, {{17, 20, 30}, {30, 25}, {17, 20, 25}},
      {{8, 64, 48}, {8, 48, 40}, {8, 64, 40}},   {{16, 20, 30}, {16, 25, 30}, {16, 20, 25}},
  };
  for (const MatmulCase& c : cases) {
    INFO("a " << shape_str(c.a) << " b " << shape_str(c.b));
    Tensor a = random(c.a, 11), b = random(c.b, 12);
    if (c.b.back() != c.out.back()) b = b.transpose(-2, -1);  // the transposed-b case
    Tensor ref = reference_matmul(a, b.contiguous());
    CHECK(max_abs_diff(matmul(a, b), ref) < 1e-10);
    Tensor y32 = matmul(a.to(DType::Float32), b.to(DType::Float32));
    CHECK(y32.dtype() == DType::Float32);
    CHECK(max_abs_diff(y32.to(DType::Float64), ref) < 1e-3);
  }
  // A transposed lhs (the weight gradient's dyᵀ·x), and both operands transposed, batched, in
  // float32: the views reach oneDNN as transpose flags.
  const Tensor a32 = random({4, 90, 100}, 13, DType::Float32), b32 = random({4, 80, 90}, 14, DType::Float32);
  const Tensor c32 = random({4, 90, 80}, 15, DType::Float32);
  const Tensor at = a32.transpose(-2, -1), bt = b32.transpose(-2, -1);
  REQUIRE(!at.is_contiguous());
  const Tensor at64 = at.to(DType::Float64).contiguous();
  CHECK(max_abs_diff(matmul(at, c32).to(DType::Float64), reference_matmul(at64, c32.to(DType::Float64))) < 1e-3);
  CHECK(max_abs_diff(matmul(at, bt).to(DType::Float64), reference_matmul(at64, bt.to(DType::Float64).contiguous())) <
        1e-3);
}

TEST_CASE("linear matches x·Wᵀ + b for any leading dims", "[linalg]") {
  Tensor w = random({5, 4}, 1), b = random({5}, 2);
  for (const Shape& xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}, Shape{0, 4}}) {
    INFO("x " << shape_str(xs));
    Tensor x = random(xs, 3);
    Tensor ref = reference_matmul(x, w.t().contiguous());
    CHECK(max_abs_diff(linear(x, w), ref) < 1e-12);
    CHECK(max_abs_diff(linear(x, w, b), ref + b) < 1e-12);
  }
  // float32, large enough for the threaded GEMM, with a non-contiguous input.
  Tensor x = random({40, 64, 33}, 4).permute({1, 0, 2});
  Tensor w2 = random({70, 33}, 5), b2 = random({70}, 6);
  Tensor y = linear(x.to(DType::Float32), w2.to(DType::Float32), b2.to(DType::Float32));
  CHECK(max_abs_diff(y.to(DType::Float64), reference_matmul(x.contiguous(), w2.t().contiguous()) + b2) < 1e-3);
}

TEST_CASE("matmul and linear errors name the op and the shapes", "[linalg][errors]") {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  CHECK_THROWS_WITH(matmul(a, b), Catch::Contains("matmul") && Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4})),
                    Catch::Contains("matmul") && Catch::Contains("[3]") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})),
                    Catch::Contains("matmul") && Catch::Contains("batch") && Catch::Contains("[2, 2, 3]"));
  CHECK_THROWS_WITH(matmul(zeros({}), zeros({3})), Catch::Contains("matmul") && Catch::Contains("at least one dim"));
  CHECK_THROWS_WITH(matmul(a, zeros({3, 2}, DType::Float64)), Catch::Contains("matmul") && Catch::Contains("dtype"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}, DType::Int64), zeros({3, 2}, DType::Int64)),
                    Catch::Contains("matmul") && Catch::Contains("floating"));
  CHECK_THROWS_WITH(linear(zeros({2, 3}), zeros({4, 5})),
                    Catch::Contains("linear") && Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  CHECK_THROWS_WITH(linear(zeros({2, 5}), zeros({4, 5}), zeros({5})),
                    Catch::Contains("linear") && Catch::Contains("bias") && Catch::Contains("[5]"));
  CHECK_THROWS_WITH(linear(zeros({2, 5}), zeros({20})), Catch::Contains("linear") && Catch::Contains("[20]"));
}

TEST_CASE("FlopCounter counts the multiply-accumulates of matmul, linear and conv2d", "[linalg][flops]") {
  FlopCounter outer;
  {
    FlopCounter counter;
    matmul(randn({4, 2, 3, 5}), randn({5, 7}));  // 4·2 batches of 3x5 · 5x7
    CHECK(counter.macs() == 4 * 2 * 3 * 5 * 7);
    linear(randn({6, 10}), randn({8, 10}), randn({8}));
    CHECK(counter.macs() == 4 * 2 * 3 * 5 * 7 + 6 * 10 * 8);
  }
  // The inner counter took the counts; the outer one resumes after it is gone.
  CHECK(outer.macs() == 0);
  // Grouped conv: each output element sums over C/groups · kH · kW inputs.
  conv2d(randn({2, 4, 8, 8}), randn({6, 2, 3, 3}), Tensor(), {2, 2}, {1, 1}, {1, 1}, 2);
  CHECK(outer.macs() == 2 * 6 * 4 * 4 * (2 * 3 * 3));
}
