// CPU GEMM (see gemm.h) on two libraries, chosen per product by measurement (docs/benchmarks.md):
//
// - oneDNN's sgemm (TESSERA_ONEDNN builds) for float32 products of at least kOneDnnMacs
//   multiply-adds: its AVX-512/AVX2 kernels, picked at run time for the CPU, reach ~95% of the
//   cores' FMA peak on a ViT's shapes, transposed operands included, where Eigen's reach ~65%.
//   A GEMM that has the threads to itself is one multithreaded oneDNN call (it partitions the
//   product itself); the GEMMs of a batch run one per thread, each single-threaded (oneDNN runs
//   serially inside an OpenMP parallel region).
// - Eigen for float64 (gradient checks; oneDNN has no dgemm), for tiny float32 products, where
//   oneDNN's per-call overhead (~0.15 us) dominates, and for every product without oneDNN. Each
//   gemm_block is one single-threaded Eigen product on row-major Maps with outer strides (Eigen
//   packs op(A)/op(B) itself, so a transposed operand costs no copy); the threading is
//   parallel_for over (batch entry, panel) units.
#include "tessera/ops/cpu/gemm.h"

#include <algorithm>
#include <type_traits>

#include <Eigen/Core>
#include <omp.h>
#ifdef TESSERA_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "tessera/core/error.h"
#include "tessera/core/parallel.h"

namespace tessera::cpu {

namespace {

// Below this many multiply-adds in total, starting threads costs more than it saves.
constexpr int64_t kSerialMacs = int64_t{1} << 17;
// A GEMM is cut into panels only when the batch cannot balance the threads; panels are at least
// kMinPanel wide and start on multiples of kPanelAlign (a multiple of the micro-kernel tile), so
// the panels run at full-tile efficiency.
constexpr int64_t kMinPanel = 32;
constexpr int64_t kPanelAlign = 16;

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>;

// C[r0:r1, c0:c1] of one GEMM, single-threaded.
template <class T>
void gemm_block(const GemmDesc& d, T alpha, const T* a, const T* b, T beta, T* c, int64_t r0, int64_t r1, int64_t c0,
                int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  if (rows <= 0 || cols <= 0) return;
  MutMap<T> C(c + r0 * d.ldc + c0, rows, cols, Eigen::OuterStride<>(d.ldc));
  if (d.k == 0 || alpha == T(0)) {  // no product term: C = beta · C, without reading C when beta == 0
    if (beta == T(0)) C.setZero();
    else if (beta != T(1)) C *= beta;
    return;
  }
  // Rows r0.. of op(A) are rows of A, or columns of A when it is transposed; likewise for B's columns.
  const T* pa = d.trans_a ? a + r0 : a + r0 * d.lda;
  const T* pb = d.trans_b ? b + c0 * d.ldb : b + c0;
  ConstMap<T> A(pa, d.trans_a ? d.k : rows, d.trans_a ? rows : d.k, Eigen::OuterStride<>(d.lda));
  ConstMap<T> B(pb, d.trans_b ? cols : d.k, d.trans_b ? d.k : cols, Eigen::OuterStride<>(d.ldb));
  auto run = [&](const auto& op_a, const auto& op_b) {
    if (beta == T(0)) {
      C.noalias() = alpha * op_a * op_b;  // Eigen zero-fills C before accumulating: C is never read
    } else {
      if (beta != T(1)) C *= beta;
      C.noalias() += alpha * op_a * op_b;
    }
  };
  if (!d.trans_a && !d.trans_b) run(A, B);
  else if (d.trans_a && !d.trans_b) run(A.transpose(), B);
  else if (!d.trans_a && d.trans_b) run(A, B.transpose());
  else run(A.transpose(), B.transpose());
}

#ifdef TESSERA_ONEDNN
// Below this many multiply-adds per product, Eigen's inlined kernel beats oneDNN's call overhead
// (XCA's 16x16x196 attention maps: Eigen 32 us, oneDNN 49 us for 64 of them).
constexpr int64_t kOneDnnMacs = int64_t{1} << 16;

// One product through oneDNN, on `threads` threads (1 inside a parallel region, where oneDNN runs
// serially anyway). oneDNN sizes its team by omp_get_max_threads(), so the caller's OpenMP setting
// is set to Tessera's thread count for the call and restored after.
void onednn_gemm(const GemmDesc& d, float alpha, const float* a, const float* b, float beta, float* c, int threads) {
  const int previous = omp_get_max_threads();
  if (previous != threads) omp_set_num_threads(threads);
  const dnnl_status_t status = dnnl_sgemm(d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', d.m, d.n, d.k, alpha, a, d.lda,
                                          b, d.ldb, beta, c, d.ldc);
  if (previous != threads) omp_set_num_threads(previous);
  TS_CHECK(status == dnnl_success, "GEMM: oneDNN's sgemm failed with status ", static_cast<int>(status), " for a [",
           d.m, ", ", d.k, "] x [", d.k, ", ", d.n, "] product");
}

// The oneDNN path of gemm_batched; false when the product is Eigen's (see the top of the file).
bool try_onednn(const GemmDesc& d, int64_t batch, float alpha, BatchPtr<const float> a, BatchPtr<const float> b,
                float beta, BatchPtr<float> c) {
  if (d.m * d.n * std::max<int64_t>(d.k, 1) < kOneDnnMacs) return false;
  const int64_t threads = get_num_threads();
  if (batch % threads != 0 && batch < 4 * threads) {  // too few entries to share: each gets every thread
    for (int64_t i = 0; i < batch; ++i) onednn_gemm(d, alpha, a[i], b[i], beta, c[i], static_cast<int>(threads));
    return true;
  }
  parallel_for(0, batch, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) onednn_gemm(d, alpha, a[i], b[i], beta, c[i], 1);
  });
  return true;
}
#endif

// Start of panel q of `panels` over a dimension of length len (aligned, monotone, ends at len).
int64_t panel_edge(int64_t q, int64_t panels, int64_t len) {
  if (q >= panels) return len;
  const int64_t raw = len * q / panels;
  return std::min(len, (raw + kPanelAlign / 2) / kPanelAlign * kPanelAlign);
}

}  // namespace

template <class T>
void gemm_batched(const GemmDesc& d, int64_t batch, T alpha, BatchPtr<const T> a, BatchPtr<const T> b, T beta,
                  BatchPtr<T> c) {
  if (batch <= 0 || d.m <= 0 || d.n <= 0) return;
#ifdef TESSERA_ONEDNN
  if constexpr (std::is_same_v<T, float>)
    if (d.k > 0 && alpha != 0.0f && try_onednn(d, batch, alpha, a, b, beta, c)) return;
#endif
  const int64_t threads = get_num_threads();
  const int64_t macs = batch * d.m * d.n * std::max<int64_t>(d.k, 1);
  // Split each GEMM into panels of C's longer side when whole batch entries would leave threads
  // idle (batch 1, or a small batch that is not a multiple of the thread count).
  const bool split_rows = d.m >= d.n;
  const int64_t split_len = split_rows ? d.m : d.n;
  int64_t panels = 1;
  if (batch % threads != 0 && batch < 4 * threads) panels = std::clamp<int64_t>(split_len / kMinPanel, 1, threads);
  const int64_t units = batch * panels;
  const int64_t grain = macs < kSerialMacs ? units : 1;  // one chunk = serial
  parallel_for(0, units, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i = u / panels, p = u % panels;
      const int64_t lo = panel_edge(p, panels, split_len), hi = panel_edge(p + 1, panels, split_len);
      if (split_rows) gemm_block<T>(d, alpha, a[i], b[i], beta, c[i], lo, hi, 0, d.n);
      else gemm_block<T>(d, alpha, a[i], b[i], beta, c[i], 0, d.m, lo, hi);
    }
  });
}

template <class T>
void gemm(const GemmDesc& d, T alpha, const T* a, const T* b, T beta, T* c) {
  gemm_batched<T>(d, 1, alpha, BatchPtr<const T>{a}, BatchPtr<const T>{b}, beta, BatchPtr<T>{c});
}

template void gemm<float>(const GemmDesc&, float, const float*, const float*, float, float*);
template void gemm<double>(const GemmDesc&, double, const double*, const double*, double, double*);
template void gemm_batched<float>(const GemmDesc&, int64_t, float, BatchPtr<const float>, BatchPtr<const float>, float,
                                  BatchPtr<float>);
template void gemm_batched<double>(const GemmDesc&, int64_t, double, BatchPtr<const double>, BatchPtr<const double>,
                                   double, BatchPtr<double>);

}  // namespace tessera::cpu
