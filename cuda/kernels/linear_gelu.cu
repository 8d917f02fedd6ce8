// CUDA kernels of linear_gelu (ops/kernels/linear_gelu.h; formulas as ops/cpu/linear_gelu.cpp): the
// forward is the library GEMM (the matmul kernel) and one element-wise pass over [rows, C] that reads
// its output and writes y; the
// backward writes its element-wise gradient in the same pass that adds the per-column sums of its
// parameter gradient into fixed chunks of rows (cuda/column_sums.h), so the parameter gradient is
// deterministic and needs no atomics. Beside bfloat16/float16 activations the bias and its gradient
// are float32 (core/dtype.h accumulate_dtype), the arithmetic too.
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/unary_math.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/linear_gelu.h"

namespace tessera::cuda {

namespace {

// ---- bias + GELU -----------------------------------------------------------------------------------

// h = pre + bias rounded to the stored type: the forward's GELU input, made again by the backward
// to the same bits (so pre is never written back).
template <class S, class A>
__device__ A biased(const S* pre, const A* bias, int64_t i, int64_t c) {
  return convert::convert<S, A>(convert::convert<A, S>(convert::convert<S, A>(pre[i]) + bias[c]));
}

template <class S, class A>
__global__ void linear_gelu_elements(const S* pre, const A* bias, UnaryArgs gelu, int64_t n, int64_t C, S* y) {
  TS_GRID_STRIDE_LOOP(i, n) { y[i] = convert::convert<A, S>(unary_value(gelu, biased(pre, bias, i, i % C))); }
}

// gpre = g·gelu'(h); partial[k·C + c] = Σ gpre over the rows of chunk k (when partial is given).
template <class S, class A>
__global__ void linear_gelu_grads(const S* g, const S* pre, const A* bias, UnaryArgs gelu, int64_t rows, int64_t C,
                                  int64_t chunks, S* gpre, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * C) {
    const int64_t k = i / C, c = i % C;
    double acc = 0;
    for (int64_t r = k * kChunkRows; r < dm::min(rows, (k + 1) * kChunkRows); ++r) {
      const A x = biased(pre, bias, r * C + c, c);
      // GELU's derivative reads x only; y may be any value (ops/kernels/elementwise.h).
      const A v = unary_derivative(gelu, x, x, convert::convert<S, A>(g[r * C + c]));
      gpre[r * C + c] = convert::convert<A, S>(v);
      acc += static_cast<double>(v);
    }
    if (partial) partial[i] = acc;
  }
}

}  // namespace

void linear_gelu(const Tensor& x, const Tensor& wt, const Tensor& bias, bool approximate, const Tensor& pre_out,
                 const Tensor& y) {
  const int64_t n = y.numel(), C = y.shape().back();
  if (n == 0) return;
  // The library GEMM writes the product (into y's own memory in inference: the element-wise pass
  // reads each element before it writes it), then one pass adds the bias and applies GELU.
  const Tensor& pre = pre_out.defined() ? pre_out : y;
  matmul_kernel[y.device()](x, wt, Tensor(), pre, Tensor());
  KernelContext ctx(y);
  dispatch_floating(pre.dtype(), "linear_gelu", [&]<class S, class A>() {
    launch("linear_gelu", linear_gelu_elements<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, pre.device_data<S>(),
           bias.device_data<A>(), gelu_args(approximate), n, C, y.device_data<S>());
  });
}

void linear_gelu_backward(const Tensor& g, const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& gpre,
                          const Tensor& gbias) {
  const int64_t C = pre.shape().back(), rows = C > 0 ? pre.numel() / C : 0;
  if (C == 0) return;
  KernelContext ctx(pre);
  dispatch_floating(pre.dtype(), "linear_gelu_backward", [&]<class S, class A>() {
    const int64_t chunks = row_chunks(rows);
    Tensor partial;
    if (gbias.defined()) partial = Tensor::empty({chunks * C}, DType::Float64, pre.device());
    launch("linear_gelu_backward", linear_gelu_grads<S, A>, blocks_for(chunks * C), kBlockThreads, 0, ctx.stream,
           g.device_data<S>(), pre.device_data<S>(), bias.device_data<A>(), gelu_args(approximate), rows, C, chunks,
           gpre.device_data<S>(), device_ptr_or_null<double>(partial));
    if (gbias.defined())
      launch("linear_gelu bias gradient", sum_column_chunks<A>, blocks_for(C), kBlockThreads, 0, ctx.stream,
             partial.device_data<double>(), chunks, C, gbias.device_data<A>());
  });
}

}  // namespace tessera::cuda
