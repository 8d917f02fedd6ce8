// CUDA kernels of the normalization family (formulas in ops/kernels/normalization.h, semantics as
// ops/cpu/normalization.cpp):
//   - layer norm works one row of C values per block (block reductions for the row statistics and
//     for the two means of its backward); its weight and bias gradients are column sums over all
//     rows in double, in the two deterministic stages of cuda/column_sums.h;
//   - batch norm reduces each channel over N and S with one block per channel, in double.
#include <algorithm>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/normalization.h"

namespace tessera::cuda {

namespace {

// ---- layer norm ------------------------------------------------------------------------------------

template <class T>
__global__ void layer_norm_rows(const T* x, const T* w, const T* b, double eps, int64_t rows, int64_t C, T* y, T* mean,
                                T* rstd) {
  TS_SHARED(T, scratch, 32);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * C;
    T s = 0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += xr[i];
    const T mu = block_all_reduce(s, scratch, SumOp{}, T(0)) / T(C);
    T v = 0;  // second pass: no cancellation
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) v += (xr[i] - mu) * (xr[i] - mu);
    const T var = block_all_reduce(v, scratch, SumOp{}, T(0)) / T(C);
    const T rs = T(1) / dm::sqrt(var + T(eps));
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      T out = (xr[i] - mu) * rs;
      if (w) out *= w[i];
      if (b) out += b[i];
      y[r * C + i] = out;
    }
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// gx = rstd·(ĝ − mean_C(ĝ) − x̂·mean_C(ĝ·x̂)), ĝ = gy·w.
template <class T>
__global__ void layer_norm_backward_rows(const T* gy, const T* x, const T* mean, const T* rstd, const T* w,
                                         int64_t rows, int64_t C, T* gx) {
  TS_SHARED(T, scratch, 32);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T mu = mean[r], rs = rstd[r];
    T sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      const T g = w ? gy[r * C + i] * w[i] : gy[r * C + i];
      sg += g;
      sgx += g * (x[r * C + i] - mu) * rs;
    }
    const T a = block_all_reduce(sg, scratch, SumOp{}, T(0)) / T(C);
    const T b = block_all_reduce(sgx, scratch, SumOp{}, T(0)) / T(C);
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      const T g = w ? gy[r * C + i] * w[i] : gy[r * C + i];
      gx[r * C + i] = rs * (g - a - (x[r * C + i] - mu) * rs * b);
    }
  }
}

// partial[k][c] and partial[chunks + k][c]: Σ gy·x̂ and Σ gy over the rows of chunk k, column c.
template <class T>
__global__ void layer_norm_param_partials(const T* gy, const T* x, const T* mean, const T* rstd, int64_t rows,
                                          int64_t C, int64_t chunks, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * C) {
    const int64_t k = i / C, c = i % C;
    double dw = 0, db = 0;
    for (int64_t r = k * kChunkRows; r < dm::min(rows, (k + 1) * kChunkRows); ++r) {
      const double g = gy[r * C + c];
      dw += g * static_cast<double>((x[r * C + c] - mean[r]) * rstd[r]);
      db += g;
    }
    partial[i] = dw;
    partial[chunks * C + i] = db;
  }
}

// ---- batch norm: x as [N, C, S] ------------------------------------------------------------------------

// The value of channel c at position i of its N·S values.
template <class T>
__device__ T channel_value(const T* x, int64_t i, int64_t c, int64_t C, int64_t S) {
  return x[(i / S * C + c) * S + i % S];
}

template <class T>
__global__ void batch_norm_stats_channels(const T* x, int64_t N, int64_t C, int64_t S, T* mean, T* var) {
  TS_SHARED(double, scratch, 32);
  const int64_t count = N * S;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += channel_value(x, i, c, C, S);
    const double mu = block_all_reduce(s, scratch, SumOp{}, 0.0) / static_cast<double>(count);
    double ss = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const double d = static_cast<double>(channel_value(x, i, c, C, S) - static_cast<T>(mu));
      ss += d * d;
    }
    ss = block_all_reduce(ss, scratch, SumOp{}, 0.0);
    if (threadIdx.x == 0) {
      mean[c] = static_cast<T>(mu);
      var[c] = static_cast<T>(ss / static_cast<double>(count));
    }
  }
}

template <class T>
__global__ void channel_grad_sums_channels(const T* g, const T* x, const T* center, int64_t N, int64_t C, int64_t S,
                                           T* sum_g, T* sum_gxc) {
  TS_SHARED(double, scratch, 32);
  const int64_t count = N * S;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T gv = channel_value(g, i, c, C, S);
      sg += gv;
      sgx += gv * (channel_value(x, i, c, C, S) - center[c]);
    }
    sg = block_all_reduce(sg, scratch, SumOp{}, 0.0);
    sgx = block_all_reduce(sgx, scratch, SumOp{}, 0.0);
    if (threadIdx.x == 0) {
      sum_g[c] = static_cast<T>(sg);
      sum_gxc[c] = static_cast<T>(sgx);
    }
  }
}

template <class T>
__global__ void channel_affine_elements(const T* a, const T* alpha, const T* b, const T* beta, const T* gamma,
                                        int64_t n, int64_t C, int64_t S, T* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i / S % C;
    T v = a[i] * alpha[c];
    if (b) v += b[i] * beta[c];
    if (gamma) v += gamma[c];
    out[i] = v;
  }
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  if (rows == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
    launch("layer_norm_rows", layer_norm_rows<scalar_t>, row_blocks(rows), kRowThreads, 0, ctx.stream,
           x.device_data<scalar_t>(), device_ptr_or_null<scalar_t>(weight), device_ptr_or_null<scalar_t>(bias), eps,
           rows, C, y.device_data<scalar_t>(), mean.device_data<scalar_t>(), rstd.device_data<scalar_t>());
  });
}

void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& gx, const Tensor& gweight, const Tensor& gbias) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  KernelContext ctx(x);
  TS_DISPATCH_FLOAT(x.dtype(), "layer_norm_backward", [&] {
    using T = scalar_t;
    if (gx.defined() && rows > 0)
      launch("layer_norm_backward_rows", layer_norm_backward_rows<T>, row_blocks(rows), kRowThreads, 0, ctx.stream,
             gy.device_data<T>(), x.device_data<T>(), mean.device_data<T>(), rstd.device_data<T>(),
             device_ptr_or_null<T>(weight), rows, C, gx.device_data<T>());
    if (!gweight.defined() && !gbias.defined()) return;
    const int64_t chunks = row_chunks(rows);
    const Tensor partial = Tensor::empty({2 * chunks * C}, DType::Float64, x.device());
    launch("layer_norm_param_partials", layer_norm_param_partials<T>, blocks_for(chunks * C), kBlockThreads, 0,
           ctx.stream, gy.device_data<T>(), x.device_data<T>(), mean.device_data<T>(), rstd.device_data<T>(), rows, C,
           chunks, partial.device_data<double>());
    if (gweight.defined())
      launch("layer_norm weight gradient", sum_column_chunks<T>, blocks_for(C), kBlockThreads, 0, ctx.stream,
             partial.device_data<double>(), chunks, C, gweight.device_data<T>());
    if (gbias.defined())
      launch("layer_norm bias gradient", sum_column_chunks<T>, blocks_for(C), kBlockThreads, 0, ctx.stream,
             partial.device_data<double>() + chunks * C, chunks, C, gbias.device_data<T>());
  });
}

void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const ChannelLayout d = channel_layout(x);
  if (d.C == 0) return;
  KernelContext ctx(x);
  TS_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    launch("batch_norm_stats", batch_norm_stats_channels<scalar_t>, row_blocks(d.C), kRowThreads, 0, ctx.stream,
           x.device_data<scalar_t>(), d.N, d.C, d.S, mean.device_data<scalar_t>(), var.device_data<scalar_t>());
  });
}

void channel_grad_sums(const Tensor& g, const Tensor& x, const Tensor& center, const Tensor& sum_g,
                       const Tensor& sum_gxc) {
  const ChannelLayout d = channel_layout(x);
  if (d.C == 0) return;
  KernelContext ctx(x);
  TS_DISPATCH_FLOAT(x.dtype(), "batch_norm_backward", [&] {
    launch("channel_grad_sums", channel_grad_sums_channels<scalar_t>, row_blocks(d.C), kRowThreads, 0, ctx.stream,
           g.device_data<scalar_t>(), x.device_data<scalar_t>(), center.device_data<scalar_t>(), d.N, d.C, d.S,
           sum_g.device_data<scalar_t>(), sum_gxc.device_data<scalar_t>());
  });
}

void channel_affine(const Tensor& a, const Tensor& alpha, const Tensor& b, const Tensor& beta, const Tensor& gamma,
                    const Tensor& out) {
  const ChannelLayout d = channel_layout(a);
  const int64_t n = a.numel();
  if (n == 0) return;
  KernelContext ctx(out);
  TS_DISPATCH_FLOAT(a.dtype(), "batch_norm", [&] {
    launch("channel_affine", channel_affine_elements<scalar_t>, blocks_for(n), kBlockThreads, 0, ctx.stream,
           a.device_data<scalar_t>(), alpha.device_data<scalar_t>(), device_ptr_or_null<scalar_t>(b),
           device_ptr_or_null<scalar_t>(beta), device_ptr_or_null<scalar_t>(gamma), n, d.C, d.S,
           out.device_data<scalar_t>());
  });
}

}  // namespace tessera::cuda
