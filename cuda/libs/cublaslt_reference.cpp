// The emulator's cuBLASLt: executes a GEMM plan by cuBLASLt's column-major contract on the host
// (device memory is host memory in the emulator). Independent of the CPU backend's GEMM: it reads
// every operand through the plan's op flags, leading dimensions, batch strides and offsets, so a
// wrong translation gives wrong numbers in the device tests.
#include <Eigen/Core>

#include "core/error.h"
#include "cuda/libs/blas.h"

namespace tessera::cuda {

namespace {

template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class T>
using ConstMap = Eigen::Map<const ColMajor<T>, 0, Eigen::OuterStride<>>;

template <class T>
void run_call(const GemmCall& c, const T* A, const T* B, const T* bias, T* C) {
  for (int64_t b = 0; b < c.batch; ++b) {
    // Stored shapes: op(X) is X itself (N) or its transpose (T).
    ConstMap<T> a(A + c.offset_a + b * c.stride_a, c.transa == BlasOp::N ? c.m : c.k,
                  c.transa == BlasOp::N ? c.k : c.m, Eigen::OuterStride<>(c.lda));
    ConstMap<T> bm(B + c.offset_b + b * c.stride_b, c.transb == BlasOp::N ? c.k : c.n,
                   c.transb == BlasOp::N ? c.n : c.k, Eigen::OuterStride<>(c.ldb));
    Eigen::Map<ColMajor<T>, 0, Eigen::OuterStride<>> d(C + c.offset_c + b * c.stride_c, c.m, c.n,
                                                       Eigen::OuterStride<>(c.ldc));
    if (c.k == 0) d.setZero();
    else if (c.transa == BlasOp::N && c.transb == BlasOp::N) d.noalias() = a * bm;
    else if (c.transa == BlasOp::N) d.noalias() = a * bm.transpose();
    else if (c.transb == BlasOp::N) d.noalias() = a.transpose() * bm;
    else d.noalias() = a.transpose() * bm.transpose();
    if (c.bias) d.colwise() += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(bias, c.m);
  }
}

}  // namespace

void run_gemm(const GemmPlan& plan, const void* A, const void* B, const void* bias, void* C, cudaStream_t, int) {
  TS_DISPATCH_FLOAT(plan.dtype, "matmul", [&] {
    using T = scalar_t;
    for (const GemmCall& c : plan.calls)
      run_call<T>(c, static_cast<const T*>(A), static_cast<const T*>(B), static_cast<const T*>(bias), static_cast<T*>(C));
  });
}

}  // namespace tessera::cuda
