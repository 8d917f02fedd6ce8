// Internal CPU GEMM (BLAS semantics, row-major): C[m, n] = alpha · op(A) · op(B) + beta · C, with
// transpose flags and leading dimensions, for float and double, single and batched.
//
// oneDNN's or Eigen's blocked GEMM (packing + SIMD micro-kernels) does the arithmetic
// single-threaded (EIGEN_DONT_PARALLELIZE; oneDNN with one OpenMP thread); the threading is the
// compute pool's: a batch is spread over threads, and when the batch cannot give every thread
// several entries each GEMM is also cut into row or column panels of C (gemm_split.h; panels write
// disjoint parts of C, so no synchronisation is needed).
#pragma once
#include <algorithm>
#include <cstdint>

#include "tessera/core/dtype.h"
#include "tessera/core/levers.h"
#include "tessera/core/parallel.h"

namespace tessera::cpu {

// One GEMM's shape. op(A) is [m, k]: A is stored [m, k] (row stride lda), or [k, m] when trans_a.
// op(B) is [k, n]: B is stored [k, n] (row stride ldb), or [n, k] when trans_b. C is [m, n] with
// row stride ldc. Leading dimensions are in elements.
struct GemmDesc {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// Where matrix i of a batch starts: base + offsets[i] when `offsets` is given (arbitrary batch
// layouts, e.g. broadcast batch dims with stride 0), else base + i · stride.
template <class T>
struct BatchPtr {
  T* base = nullptr;
  int64_t stride = 0;
  const int64_t* offsets = nullptr;
  T* operator[](int64_t i) const { return base + (offsets ? offsets[i] : i * stride); }
};

// C = alpha · op(A) · op(B) + beta · C. With beta == 0, C is not read (it may be uninitialised).
// k == 0 gives C = beta · C. Multithreaded unless called inside a parallel region.
template <class T>
void gemm(const GemmDesc& d, T alpha, const T* a, const T* b, T beta, T* c);

// `batch` independent GEMMs of the same shape: C[i] = alpha · op(A[i]) · op(B[i]) + beta · C[i].
// A and B matrices may be shared between batch entries; C matrices must not overlap.
template <class T>
void gemm_batched(const GemmDesc& d, int64_t batch, T alpha, BatchPtr<const T> a, BatchPtr<const T> b, T beta,
                  BatchPtr<T> c);

// What the bfloat16 GEMM adds to each float32 result before its one rounding: a bias on every row
// (bfloat16, as autocast rounds a linear layer's, or float32, as linear_gelu's stays) and then GELU
// (erf or tanh form): a linear_gelu in inference is one pass.
struct GemmEpilogue {
  const BFloat16* bias_bf16 = nullptr;
  const float* bias_f32 = nullptr;
  enum class Gelu : uint8_t { None, Erf, Tanh } gelu = Gelu::None;
  bool any() const { return bias_bf16 || bias_f32 || gelu != Gelu::None; }
};

// bfloat16 products (autocast on the CPU, core/autocast.h): op(A) and op(B) in bfloat16, their
// products summed in float32, C = epilogue(op(A)·op(B) + beta·C) in float32 or in bfloat16 (rounded
// once, from the float32 result); beta is 0 or 1, and 1 takes no epilogue. With the CPU's bfloat16
// instructions (core/cpu_features.h) oneDNN's bf16 matmul runs it (AVX-512 BF16 or AMX kernels,
// bfloat16 memory descriptors, the epilogue as its bias and post-ops: gemm_bf16.cpp); without them,
// and for tiny products, the operands are converted to float32 and gemm() above runs it, the same
// products summed in another order.
template <class C>
void gemm_bf16_batched(const GemmDesc& d, int64_t batch, BatchPtr<const BFloat16> a, BatchPtr<const BFloat16> b,
                       float beta, BatchPtr<C> c, const GemmEpilogue& epilogue = {});
template <class C>
void gemm_bf16(const GemmDesc& d, const BFloat16* a, const BFloat16* b, float beta, C* c,
               const GemmEpilogue& epilogue = {}) {
  gemm_bf16_batched<C>(d, 1, BatchPtr<const BFloat16>{a}, BatchPtr<const BFloat16>{b}, beta, BatchPtr<C>{c}, epilogue);
}

// C = op(A)·op(B), beta 0, in the storage type of every operand (float32, float64, or bfloat16 with
// float32 sums): the product that gemm_row_panels cuts into panels.
inline void product(const GemmDesc& d, const float* a, const float* b, float* c) { gemm<float>(d, 1, a, b, 0, c); }
inline void product(const GemmDesc& d, const double* a, const double* b, double* c) { gemm<double>(d, 1, a, b, 0, c); }
inline void product(const GemmDesc& d, const BFloat16* a, const BFloat16* b, BFloat16* c) {
  gemm_bf16<BFloat16>(d, a, b, 0.0f, c);
}

// C = op(A)·op(B) (one GEMM, beta 0) with its rows cut into panels that the threads share, each
// panel's GEMM single-threaded and followed at once by epilogue(r0, r1), which finishes C's rows
// [r0, r1) while they are still in the core's cache: a linear layer's bias, linear_gelu's bias and
// GELU. Done after the
// whole product instead, they cost a pass over C from memory (linear_gelu's [B·N, 4C] in
// CoaT-Lite's first stage is 51 MB at batch 8). Each panel's GEMM packs op(B) again ([k, n]), so
// panels pay only where they can hold several times k rows within a core's L2 (small k, as in
// CoaT's first stages); elsewhere, and with too few rows for every thread, one threaded GEMM and
// one epilogue over all rows.
template <class T, class Epilogue>
void gemm_row_panels(const GemmDesc& d, const T* a, const T* b, T* c, const Epilogue& epilogue) {
  constexpr int64_t kPanelBytes = int64_t{512} << 10;  // half of a Zen 4/5 or Sapphire Rapids L2
  constexpr int64_t kRowsPerDepth = 4;                 // panel rows per row of the packed op(B)
  const int64_t threads = get_num_threads();
  const int64_t most_rows = kPanelBytes / static_cast<int64_t>(sizeof(T)) / std::max<int64_t>(d.n, 1);
  const int64_t fewest_rows = kRowsPerDepth * std::max<int64_t>(d.k, 8);
  if (!levers().gemm_row_panels || threads <= 1 || most_rows < fewest_rows || d.m < 2 * threads * fewest_rows) {
    product(d, a, b, c);
    epilogue(int64_t{0}, d.m);
    return;
  }
  // As many panels as the largest fit needs, and at least the pool's chunks per thread where the
  // rows allow, so that a thread that loses its core leaves panels to the others.
  const int64_t panels =
      std::max((d.m + most_rows - 1) / most_rows, std::min(threads * detail::kChunksPerThread, d.m / fewest_rows));
  parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = d.m * p / panels, r1 = d.m * (p + 1) / panels;
      GemmDesc panel = d;
      panel.m = r1 - r0;
      product(panel, d.trans_a ? a + r0 : a + r0 * d.lda, b, c + r0 * d.ldc);  // serial in here
      epilogue(r0, r1);
    }
  });
}

}  // namespace tessera::cpu
