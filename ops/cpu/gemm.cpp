// CPU GEMM (see gemm.h) on two libraries, chosen per product by measurement (docs/benchmarks.md):
//
// - oneDNN's sgemm (TESSERA_ONEDNN builds) for float32 products of at least kOneDnnMacs
//   multiply-adds: its AVX-512/AVX2 kernels, picked at run time for the CPU, reach ~95% of the
//   cores' FMA peak on a ViT's shapes, transposed operands included, where Eigen's reach ~65%.
// - Eigen for float64 (gradient checks; oneDNN has no dgemm), for tiny float32 products, where
//   oneDNN's per-call overhead (~0.15 us) dominates, and for every product without oneDNN: one
//   single-threaded Eigen product on row-major Maps with outer strides (Eigen packs op(A)/op(B)
//   itself, so a transposed operand costs no copy).
//
// Either way every call is single-threaded and the threading is the compute pool's: parallel_for
// over (batch entry, panel) units (gemm_split.h), so that no product waits for a thread that lost
// its core.
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
#include "tessera/ops/cpu/gemm_split.h"

namespace tessera::cpu {

namespace {

// Below this many multiply-adds in total, starting threads costs more than it saves.
constexpr int64_t kSerialMacs = int64_t{1} << 17;

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>;

// One GEMM by Eigen, single-threaded.
template <class T>
void eigen_gemm(const GemmDesc& d, T alpha, const T* a, const T* b, T beta, T* c) {
  if (d.m <= 0 || d.n <= 0) return;
  MutMap<T> C(c, d.m, d.n, Eigen::OuterStride<>(d.ldc));
  if (d.k == 0 || alpha == T(0)) {  // no product term: C = beta · C, without reading C when beta == 0
    if (beta == T(0)) C.setZero();
    else if (beta != T(1)) C *= beta;
    return;
  }
  ConstMap<T> A(a, d.trans_a ? d.k : d.m, d.trans_a ? d.m : d.k, Eigen::OuterStride<>(d.lda));
  ConstMap<T> B(b, d.trans_b ? d.n : d.k, d.trans_b ? d.k : d.n, Eigen::OuterStride<>(d.ldb));
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

// One product through oneDNN, single-threaded: oneDNN sizes its OpenMP team by
// omp_get_max_threads(), so that is 1 for the call and restored after.
void onednn_gemm(const GemmDesc& d, float alpha, const float* a, const float* b, float beta, float* c) {
  const int previous = omp_get_max_threads();
  if (previous != 1) omp_set_num_threads(1);
  const dnnl_status_t status = dnnl_sgemm(d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', d.m, d.n, d.k, alpha, a, d.lda,
                                          b, d.ldb, beta, c, d.ldc);
  if (previous != 1) omp_set_num_threads(previous);
  TS_CHECK(status == dnnl_success, "GEMM: oneDNN's sgemm failed with status ", static_cast<int>(status), " for a [",
           d.m, ", ", d.k, "] x [", d.k, ", ", d.n, "] product");
}
#endif

// One unit of gemm_batched (see gemm_split.h): panel q of entry i, by oneDNN or Eigen.
template <class T>
void gemm_unit(const GemmDesc& d, const GemmSplit& split, int64_t i, int64_t q, T alpha, BatchPtr<const T> a,
               BatchPtr<const T> b, T beta, BatchPtr<T> c) {
  const GemmSplit::Panel p = split.panel(d, q);
#ifdef TESSERA_ONEDNN
  if constexpr (std::is_same_v<T, float>)
    if (p.d.k > 0 && alpha != 0.0f && d.m * d.n * d.k >= kOneDnnMacs)
      return onednn_gemm(p.d, alpha, a[i] + p.a, b[i] + p.b, beta, c[i] + p.c);
#endif
  eigen_gemm<T>(p.d, alpha, a[i] + p.a, b[i] + p.b, beta, c[i] + p.c);
}

}  // namespace

template <class T>
void gemm_batched(const GemmDesc& d, int64_t batch, T alpha, BatchPtr<const T> a, BatchPtr<const T> b, T beta,
                  BatchPtr<T> c) {
  if (batch <= 0 || d.m <= 0 || d.n <= 0) return;
  const GemmSplit split(d, batch, false);
  const int64_t units = batch * split.panels;
  const int64_t macs = batch * d.m * d.n * std::max<int64_t>(d.k, 1);
  const int64_t grain = macs < kSerialMacs ? units : 1;  // one chunk = serial
  parallel_for(0, units, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) gemm_unit<T>(d, split, u / split.panels, u % split.panels, alpha, a, b, beta, c);
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
