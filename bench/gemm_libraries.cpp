// GEMM libraries on Tessera's shapes: Eigen (Tessera's GEMM before oneDNN: single-threaded Eigen
// products on row panels, threaded by OpenMP), oneDNN's sgemm (Tessera's GEMM now, ops/cpu/gemm.cpp),
// OpenBLAS's cblas_sgemm (PyTorch's BLAS on Debian, OpenMP build) and libxsmm's JIT kernels (small
// batched products only: it is a small-matrix library). Built and run by
// scripts/bench_gemm_libraries.sh; the results are in docs/benchmarks.md ("Choosing the GEMM").
//
// Each case: row-major C[m, n] = op(A)·op(B) as the models compute it (the forward product, the
// input gradient dX = g·W and the weight gradient dW = gᵀ·x, whose transposed operand each library
// reads in place), or a batch of small products, one per thread at a time. Best of 15 timed calls
// after 3 warm-up ones, the libraries taking turns, in GFLOP/s, beside the cores' FMA peak measured the same way as
// bench/bench_kernels does.
#include <libxsmm.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench/fma_peak.h"

// OpenBLAS's CBLAS entry point (libopenblas0-openmp ships the library, not the header).
extern "C" {
enum { kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112 };
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int threads);
}

namespace {

using Clock = std::chrono::steady_clock;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;

struct Case {
  const char* name;
  bool ta, tb;
  int batch, m, n, k;
  int lda() const { return ta ? m : k; }
  int ldb() const { return tb ? k : n; }
};

// Rows [r0, r1) of one product, single-threaded, as Tessera's Eigen GEMM computed them.
void eigen_rows(const Case& c, const float* a, const float* b, float* out, int r0, int r1) {
  MutMap C(out + static_cast<int64_t>(r0) * c.n, r1 - r0, c.n, Eigen::OuterStride<>(c.n));
  const float* pa = c.ta ? a + r0 : a + static_cast<int64_t>(r0) * c.lda();
  ConstMap A(pa, c.ta ? c.k : r1 - r0, c.ta ? r1 - r0 : c.k, Eigen::OuterStride<>(c.lda()));
  ConstMap B(b, c.tb ? c.n : c.k, c.tb ? c.k : c.n, Eigen::OuterStride<>(c.ldb()));
  if (!c.ta && !c.tb) C.noalias() = A * B;
  else if (c.ta && !c.tb) C.noalias() = A.transpose() * B;
  else if (!c.ta && c.tb) C.noalias() = A * B.transpose();
  else C.noalias() = A.transpose() * B.transpose();
}

// Best time of each function over 15 rounds after 3 warm-up ones. The functions take turns within
// each round, so a VM's drift over seconds (up to 1.8x here) falls on every library alike.
std::vector<double> best_seconds(const std::vector<std::function<void()>>& fns) {
  std::vector<double> best(fns.size(), 1e30);
  for (int round = 0; round < 18; ++round)
    for (size_t f = 0; f < fns.size(); ++f) {
      if (!fns[f]) continue;
      const auto t0 = Clock::now();
      fns[f]();
      if (round >= 3) best[f] = std::min(best[f], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  for (size_t f = 0; f < fns.size(); ++f)
    if (!fns[f]) best[f] = 0;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  libxsmm_init();
  const double peak = fma_peak_gflops(threads);
  std::printf("%d thread(s); measured float32 FMA peak %.1f GFLOP/s\n\n", threads, peak);
  // Batch-8 shapes at 224x224: ViT-S/XCiT-S width 384 (1576 token rows), width 192 (CaiT-XXS,
  // UFO-ViT-T, XCiT-T), CoaT-Lite's first stage (25096 rows of width 64), and the attention
  // products of each family.
  const std::vector<Case> cases = {
      {"qkv x·Wᵀ (d 384)", false, true, 1, 1576, 1152, 384},
      {"qkv dX = g·W", false, false, 1, 1576, 384, 1152},
      {"qkv dW = gᵀ·x", true, false, 1, 1152, 384, 1576},
      {"fc1 x·Wᵀ (d 192)", false, true, 1, 1576, 768, 192},
      {"fc1 dX = g·W", false, false, 1, 1576, 192, 768},
      {"fc1 dW = gᵀ·x", true, false, 1, 768, 192, 1576},
      {"fc2 x·Wᵀ (d 192)", false, true, 1, 1576, 192, 768},
      {"CoaT fc1 x·Wᵀ (d 64)", false, true, 1, 25096, 512, 64},
      {"CoaT fc1 dW = gᵀ·x", true, false, 1, 512, 64, 25096},
      {"attention q·kᵀ (48 heads)", false, true, 48, 197, 197, 64},
      {"attention a·v", false, false, 48, 197, 64, 197},
      {"attention dk = gᵀ·q", true, false, 48, 197, 64, 197},
      {"XCA q̂·k̂ᵀ (64 heads, d 16)", false, true, 64, 16, 16, 196},
      {"XCA a·v", false, false, 64, 16, 196, 16},
      {"CoaT kᵀ·v (64 heads, d 8)", true, false, 64, 8, 8, 3136},
      {"CoaT q·(kᵀv)", false, false, 64, 3136, 8, 8},
  };
  std::printf("| product | batch x [m, n, k] | Eigen | oneDNN | OpenBLAS | libxsmm | oneDNN of peak |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    const int64_t as = static_cast<int64_t>(c.m) * c.k, bs = static_cast<int64_t>(c.k) * c.n,
                  cs = static_cast<int64_t>(c.m) * c.n;
    std::vector<float> A(as * c.batch), B(bs * c.batch), C(cs * c.batch);
    for (size_t i = 0; i < A.size(); ++i) A[i] = std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < B.size(); ++i) B[i] = std::cos(0.11f * static_cast<float>(i));
    const double gflop = 2.0 * c.batch * c.m * c.n * c.k / 1e9;
    // One product alone gets every thread; a batch runs one product per thread at a time.
    auto over_batch = [&](const std::function<void(int)>& one) {
      if (c.batch == 1) return one(0);
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int i = 0; i < c.batch; ++i) one(i);
    };
    auto eigen = [&] {
      if (c.batch > 1) {
        over_batch([&](int i) { eigen_rows(c, &A[i * as], &B[i * bs], &C[i * cs], 0, c.m); });
        return;
      }
#pragma omp parallel num_threads(threads)
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int r0 = c.m * t / nt / 16 * 16, r1 = t == nt - 1 ? c.m : c.m * (t + 1) / nt / 16 * 16;
        eigen_rows(c, A.data(), B.data(), C.data(), r0, r1);
      }
    };
    auto onednn = [&] {
      over_batch([&](int i) {
        dnnl_sgemm(c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.m, c.n, c.k, 1.0f, &A[i * as], c.lda(), &B[i * bs], c.ldb(),
                   0.0f, &C[i * cs], c.n);
      });
    };
    auto openblas = [&] {
      over_batch([&](int i) {
        cblas_sgemm(kCblasRowMajor, c.ta ? kCblasTrans : kCblasNoTrans, c.tb ? kCblasTrans : kCblasNoTrans, c.m, c.n,
                    c.k, 1.0f, &A[i * as], c.lda(), &B[i * bs], c.ldb(), 0.0f, &C[i * cs], c.n);
      });
    };
    // libxsmm is column-major: row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ. Its JIT
    // makes kernels for small products only (none here for one large product).
    std::function<void()> xsmm;
    if (c.batch > 1) {
      const int flags = (c.tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (c.ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
      const libxsmm_blasint lda = c.ldb(), ldb = c.lda(), ldc = c.n;
      const float alpha = 1.0f, beta = 0.0f;
      const libxsmm_smmfunction kernel =
          libxsmm_smmdispatch(c.n, c.m, c.k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
      if (kernel) xsmm = [&, kernel] { over_batch([&](int i) { kernel(&B[i * bs], &A[i * as], &C[i * cs]); }); };
    }
    const std::vector<double> t = best_seconds({eigen, onednn, openblas, xsmm});
    auto rate = [&](double s) {
      static char buf[4][32];
      static int slot = 0;
      char* out = buf[slot++ % 4];
      if (s > 0) std::snprintf(out, 32, "%.1f", gflop / s);
      else std::snprintf(out, 32, "-");
      return out;
    };
    std::printf("| %s | %d x [%d, %d, %d] | %s | %s | %s | %s | %.0f%% |\n", c.name, c.batch, c.m, c.n, c.k, rate(t[0]),
                rate(t[1]), rate(t[2]), rate(t[3]), 100 * gflop / t[1] / peak);
    std::fflush(stdout);
  }
  libxsmm_finalize();
  return 0;
}
