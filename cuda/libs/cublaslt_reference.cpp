// The emulator's cuBLASLt: executes a GEMM plan by cuBLASLt's column-major contract on the host
// (device memory is host memory in the emulator). Independent of the CPU backend's GEMM: it reads
// every operand through the plan's op flags, leading dimensions, batch strides and offsets, so a
// wrong translation gives wrong numbers in the device tests. Precision as on a GPU: bfloat16 and
// float16 operands are multiplied and summed in float32 and the result rounded back; with TF32 on,
// float32 operands are first rounded to TF32's 10-bit mantissa, as tensor cores do.
#include <Eigen/Core>

#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cuda {

namespace {

template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// The stored rows x cols column-major matrix at p (leading dimension ld), in the compute type C.
template <class C, class S>
ColMajor<C> load(const S* p, int64_t rows, int64_t cols, int64_t ld, bool tf32) {
  ColMajor<C> m(rows, cols);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) {
      C v = static_cast<C>(convert::to_double(p[i + j * ld]));
      if constexpr (std::is_same_v<C, float>)
        if (tf32) v = round_to_tf32(v);
      m(i, j) = v;
    }
  return m;
}

// S: the stored dtype; C: the compute type (float for the half types).
template <class S, class C>
void run_call(const GemmCall& c, bool tf32, const S* A, const S* B, const GemmPointers& p) {
  for (int64_t b = 0; b < c.batch; ++b) {
    const ColMajor<C> a = load<C>(A + c.offset_a + b * c.stride_a, c.transa == BlasOp::N ? c.m : c.k,
                                  c.transa == BlasOp::N ? c.k : c.m, c.lda, tf32);
    const ColMajor<C> bm = load<C>(B + c.offset_b + b * c.stride_b, c.transb == BlasOp::N ? c.k : c.n,
                                   c.transb == BlasOp::N ? c.n : c.k, c.ldb, tf32);
    ColMajor<C> d(c.m, c.n);
    if (c.k == 0) d.setZero();
    else if (c.transa == BlasOp::N && c.transb == BlasOp::N) d.noalias() = a * bm;
    else if (c.transa == BlasOp::N) d.noalias() = a * bm.transpose();
    else if (c.transb == BlasOp::N) d.noalias() = a.transpose() * bm;
    else d.noalias() = a.transpose() * bm.transpose();
    S* out = static_cast<S*>(p.c) + c.offset_c + b * c.stride_c;
    const S* bias = static_cast<const S*>(p.bias);
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        C v = d(i, j);
        if (c.epilogue == GemmEpilogue::Bias) v += static_cast<C>(convert::to_double(bias[i]));
        out[i + j * c.ldc] = convert::from_double<S>(v);
      }
    if (c.epilogue == GemmEpilogue::BGradB) {
      // Σ over k of op(B)'s column j, from the operand as the product read it, in the compute type
      // (plans make such calls without a batch).
      S* grad = static_cast<S*>(p.bias_grad);
      for (int64_t j = 0; j < c.n; ++j)
        grad[j] = convert::from_double<S>(c.transb == BlasOp::N ? bm.col(j).sum() : bm.row(j).sum());
    }
  }
}

}  // namespace

bool run_gemm(const GemmPlan& plan, const GemmPointers& p, cudaStream_t stream, int) {
  // Like a kernel, each call runs on the stream: now, or at each replay of a graph it captures. One
  // stream item per call, as on a GPU (one cublasLtMatmul each, one graph node each), its epilogue
  // included.
  for (const GemmCall& call : plan.calls) {
    emu::enqueue(
        stream,
        [call, dtype = plan.dtype, tf32 = plan.tf32, p] {
          const auto run = [&]<class S, class Acc>() {
            run_call<S, Acc>(call, tf32, static_cast<const S*>(p.a), static_cast<const S*>(p.b), p);
          };
          switch (dtype) {
            case DType::Float32: return run.template operator()<float, float>();
            case DType::Float64: return run.template operator()<double, double>();
            case DType::BFloat16: return run.template operator()<BFloat16, float>();
            case DType::Float16: return run.template operator()<Float16, float>();
            default: throw Error(detail::concat("matmul (cuda): dtype ", dtype_name(dtype), " is not supported"));
          }
        },
        "cublasLtMatmul");
  }
  return true;
}

}  // namespace tessera::cuda
