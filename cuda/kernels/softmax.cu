// CUDA kernels of softmax / log_softmax, forward and backward (formulas in ops/kernels/softmax.h),
// on tensors viewed as [outer, n, inner] around the softmax dim:
//   - inner == 1 (attention rows): one block per row, the max and the sum by block reductions;
//   - inner > 1 (e.g. CoaT's softmax of K over tokens, dim 2): one thread per (outer, column),
//     walking the n values of its column; neighbouring threads read neighbouring columns.
#include <algorithm>
#include <limits>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/softmax.h"

namespace tessera::cuda {

namespace {

template <class T>
__global__ void softmax_rows(SoftmaxKind kind, const T* x, int64_t rows, int64_t n, T* y) {
  TS_SHARED(T, scratch, 32);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = dm::max(m, xr[i]);
    m = block_all_reduce(m, scratch, MaxOp{}, -std::numeric_limits<T>::infinity());
    T s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T e = dm::exp(xr[i] - m);
      if (kind == SoftmaxKind::Softmax) yr[i] = e;
      s += e;
    }
    s = block_all_reduce(s, scratch, SumOp{}, T(0));
    if (kind == SoftmaxKind::Softmax) {
      const T inv = T(1) / s;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] *= inv;
    } else {
      const T log_s = dm::log(s);  // (x − m) − log Σ, not x − (m + log Σ): m's rounding would leak in
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] - m) - log_s;
    }
  }
}

template <class T>
__global__ void softmax_backward_rows(SoftmaxKind kind, const T* y, const T* gy, int64_t rows, int64_t n, T* gx) {
  TS_SHARED(T, scratch, 32);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* yr = y + row * n;
    const T* gr = gy + row * n;
    T s = 0;  // Σ gy·y (softmax) or Σ gy (log_softmax)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += kind == SoftmaxKind::Softmax ? gr[i] * yr[i] : gr[i];
    s = block_all_reduce(s, scratch, SumOp{}, T(0));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      gx[row * n + i] = kind == SoftmaxKind::Softmax ? yr[i] * (gr[i] - s) : gr[i] - dm::exp(yr[i]) * s;
  }
}

// Column c = (o, j) holds x[o·n·inner + k·inner + j] for k < n.
template <class T>
__global__ void softmax_columns(SoftmaxKind kind, const T* x, SoftmaxLayout l, T* y) {
  TS_GRID_STRIDE_LOOP(c, l.outer * l.inner) {
    const int64_t base = c / l.inner * l.n * l.inner + c % l.inner;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < l.n; ++k) m = dm::max(m, x[base + k * l.inner]);
    T s = 0;
    for (int64_t k = 0; k < l.n; ++k) s += dm::exp(x[base + k * l.inner] - m);
    if (kind == SoftmaxKind::Softmax) {
      const T inv = T(1) / s;
      for (int64_t k = 0; k < l.n; ++k) y[base + k * l.inner] = dm::exp(x[base + k * l.inner] - m) * inv;
    } else {
      const T log_s = dm::log(s);
      for (int64_t k = 0; k < l.n; ++k) y[base + k * l.inner] = (x[base + k * l.inner] - m) - log_s;
    }
  }
}

template <class T>
__global__ void softmax_backward_columns(SoftmaxKind kind, const T* y, const T* gy, SoftmaxLayout l, T* gx) {
  TS_GRID_STRIDE_LOOP(c, l.outer * l.inner) {
    const int64_t base = c / l.inner * l.n * l.inner + c % l.inner;
    T s = 0;
    for (int64_t k = 0; k < l.n; ++k) {
      const int64_t i = base + k * l.inner;
      s += kind == SoftmaxKind::Softmax ? gy[i] * y[i] : gy[i];
    }
    for (int64_t k = 0; k < l.n; ++k) {
      const int64_t i = base + k * l.inner;
      gx[i] = kind == SoftmaxKind::Softmax ? y[i] * (gy[i] - s) : gy[i] - dm::exp(y[i]) * s;
    }
  }
}

}  // namespace

void softmax(SoftmaxKind kind, const Tensor& x, int64_t dim, const Tensor& y) {
  const SoftmaxLayout l = softmax_layout(x, dim);
  if (x.numel() == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(x.dtype(), "softmax", [&] {
    if (l.inner == 1)
      launch("softmax_rows", softmax_rows<scalar_t>, row_blocks(l.outer), kRowThreads, 0, ctx.stream, kind,
             x.device_data<scalar_t>(), l.outer, l.n, y.device_data<scalar_t>());
    else
      launch("softmax_columns", softmax_columns<scalar_t>, blocks_for(l.outer * l.inner), kBlockThreads, 0, ctx.stream,
             kind, x.device_data<scalar_t>(), l, y.device_data<scalar_t>());
  });
}

void softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& gy, int64_t dim, const Tensor& gx) {
  const SoftmaxLayout l = softmax_layout(y, dim);
  if (y.numel() == 0) return;
  KernelContext ctx(gx);
  TS_DISPATCH_FLOAT(y.dtype(), "softmax_backward", [&] {
    if (l.inner == 1)
      launch("softmax_backward_rows", softmax_backward_rows<scalar_t>, row_blocks(l.outer), kRowThreads, 0, ctx.stream,
             kind, y.device_data<scalar_t>(), gy.device_data<scalar_t>(), l.outer, l.n, gx.device_data<scalar_t>());
    else
      launch("softmax_backward_columns", softmax_backward_columns<scalar_t>, blocks_for(l.outer * l.inner),
             kBlockThreads, 0, ctx.stream, kind, y.device_data<scalar_t>(), gy.device_data<scalar_t>(), l,
             gx.device_data<scalar_t>());
  });
}

}  // namespace tessera::cuda
