// CPU GEMM on Eigen (see gemm.h). Each call of gemm_block is one single-threaded Eigen product on
// row-major Maps with outer strides; Eigen packs op(A)/op(B) into cache-sized panels itself, so a
// transposed operand costs no copy here. Threading: parallel_for over (batch entry, panel) units.
#include "tessera/ops/cpu/gemm.h"

#include <algorithm>

#include <Eigen/Core>

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

template <class T> using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using ConstMap = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;
template <class T> using MutMap = Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>;

// C[r0:r1, c0:c1] of one GEMM, single-threaded.
template <class T>
void gemm_block(const GemmDesc& d, T alpha, const T* a, const T* b, T beta, T* c, int64_t r0, int64_t r1,
                int64_t c0, int64_t c1) {
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
  const int64_t threads = get_num_threads();
  const int64_t macs = batch * d.m * d.n * std::max<int64_t>(d.k, 1);
  // Split each GEMM into panels of C's longer side when whole batch entries would leave threads
  // idle (batch 1, or a small batch that is not a multiple of the thread count).
  const bool split_rows = d.m >= d.n;
  const int64_t split_len = split_rows ? d.m : d.n;
  int64_t panels = 1;
  if (batch % threads != 0 && batch < 4 * threads)
    panels = std::clamp<int64_t>(split_len / kMinPanel, 1, threads);
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
template void gemm_batched<float>(const GemmDesc&, int64_t, float, BatchPtr<const float>, BatchPtr<const float>,
                                  float, BatchPtr<float>);
template void gemm_batched<double>(const GemmDesc&, int64_t, double, BatchPtr<const double>,
                                   BatchPtr<const double>, double, BatchPtr<double>);

}  // namespace tessera::cpu
