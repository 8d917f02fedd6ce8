// Internal CPU GEMM (BLAS semantics, row-major): C[m, n] = alpha · op(A) · op(B) + beta · C, with
// transpose flags and leading dimensions, for float and double, single and batched.
//
// Eigen's blocked GEMM (packing + SIMD micro-kernels) does the arithmetic single-threaded
// (EIGEN_DONT_PARALLELIZE); the threading is ours: a batch is spread over threads, and when the
// batch cannot keep every thread busy each GEMM is additionally cut into row or column panels of C
// (panels write disjoint parts of C, so no synchronisation is needed).
#pragma once
#include <cstdint>

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

}  // namespace tessera::cpu
