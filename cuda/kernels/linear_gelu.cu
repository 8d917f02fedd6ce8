// CUDA kernels of linear_gelu (ops/kernels/linear_gelu.h; formulas as ops/cpu/linear_gelu.cpp): the
// forward is one element-wise pass over [rows, C]; the backward writes its element-wise gradient in
// the same pass that adds the per-column sums of its parameter gradient into fixed chunks of rows
// (cuda/column_sums.h), so the parameter gradient is deterministic and needs no atomics.
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/unary_math.h"
#include "tessera/ops/kernels/linear_gelu.h"

namespace tessera::cuda {

namespace {

// ---- bias + GELU -----------------------------------------------------------------------------------

template <class T>
__global__ void linear_gelu_elements(T* pre, const T* bias, UnaryArgs gelu, int64_t n, int64_t C, T* y) {
  TS_GRID_STRIDE_LOOP(i, n) {
    const T v = pre[i] + bias[i % C];
    pre[i] = v;
    y[i] = unary_value(gelu, v);
  }
}

// gpre = g·gelu'(pre); partial[k·C + c] = Σ gpre over the rows of chunk k (when partial is given).
template <class T>
__global__ void linear_gelu_grads(const T* g, const T* pre, UnaryArgs gelu, int64_t rows, int64_t C, int64_t chunks,
                                  T* gpre, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * C) {
    const int64_t k = i / C, c = i % C;
    double acc = 0;
    for (int64_t r = k * kChunkRows; r < dm::min(rows, (k + 1) * kChunkRows); ++r) {
      const T x = pre[r * C + c];
      // GELU's derivative reads x only; y may be any value (ops/kernels/elementwise.h).
      const T v = unary_derivative(gelu, x, x, g[r * C + c]);
      gpre[r * C + c] = v;
      acc += static_cast<double>(v);
    }
    if (partial) partial[i] = acc;
  }
}

}  // namespace

void linear_gelu(const Tensor& pre, const Tensor& bias, bool approximate, const Tensor& y) {
  const int64_t n = pre.numel(), C = pre.shape().back();
  if (n == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(pre.dtype(), "linear_gelu", [&] {
    using T = scalar_t;
    launch("linear_gelu", linear_gelu_elements<T>, blocks_for(n), kBlockThreads, 0, ctx.stream, pre.device_data<T>(),
           bias.device_data<T>(), gelu_args(approximate), n, C, y.device_data<T>());
  });
}

void linear_gelu_backward(const Tensor& g, const Tensor& pre, bool approximate, const Tensor& gpre,
                          const Tensor& gbias) {
  const int64_t C = pre.shape().back(), rows = C > 0 ? pre.numel() / C : 0;
  if (C == 0) return;
  KernelContext ctx(pre);
  TS_DISPATCH_FLOAT(pre.dtype(), "linear_gelu_backward", [&] {
    using T = scalar_t;
    const int64_t chunks = row_chunks(rows);
    Tensor partial;
    if (gbias.defined()) partial = Tensor::empty({chunks * C}, DType::Float64, pre.device());
    launch("linear_gelu_backward", linear_gelu_grads<T>, blocks_for(chunks * C), kBlockThreads, 0, ctx.stream,
           g.device_data<T>(), pre.device_data<T>(), gelu_args(approximate), rows, C, chunks, gpre.device_data<T>(),
           device_ptr_or_null<double>(partial));
    if (gbias.defined())
      launch("linear_gelu bias gradient", sum_column_chunks<T>, blocks_for(C), kBlockThreads, 0, ctx.stream,
             partial.device_data<double>(), chunks, C, gbias.device_data<T>());
  });
}

}  // namespace tessera::cuda
