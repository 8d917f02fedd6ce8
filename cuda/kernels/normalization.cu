// CUDA kernels of the normalization family (formulas in ops/kernels/normalization.h, semantics as
// ops/cpu/normalization.cpp):
//   - layer norm works one row of C values per warp where C <= kWarpRowMax (the row in registers,
//     warp reductions: cuda/warp_rows.h), otherwise (or with TESSERA_WARP_ROWS=0) per block (block
//     reductions for the row statistics and for the two means of its backward); its weight and
//     bias gradients are column sums over all rows in double, in the two deterministic stages of
//     cuda/column_sums.h;
//   - batch norm reduces each channel over N and S in chunks of planes, in double, then combines
//     each channel's chunks in order (below).
// bfloat16 and float16 activations compute in float32, beside float32 parameters and statistics
// (core/dtype.h accumulate_dtype).
#include <algorithm>

#include "tessera/core/host_device.h"
#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/warp_rows.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/normalization.h"

namespace tessera::cuda {

namespace {

// ---- layer norm ------------------------------------------------------------------------------------

template <class S, class A>
__global__ void layer_norm_rows(const S* x, const A* w, const A* b, double eps, int64_t rows, int64_t C, S* y, A* mean,
                                A* rstd) {
  TS_SHARED(A, scratch, 32);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S* xr = x + r * C;
    A s = 0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += convert::convert<S, A>(xr[i]);
    const A mu = block_all_reduce(s, scratch, SumOp{}, A(0)) / A(C);
    A v = 0;  // second pass: no cancellation
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      const A d = convert::convert<S, A>(xr[i]) - mu;
      v += d * d;
    }
    const A var = block_all_reduce(v, scratch, SumOp{}, A(0)) / A(C);
    const A rs = A(1) / dm::sqrt(var + A(eps));
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      A out = (convert::convert<S, A>(xr[i]) - mu) * rs;
      if (w) out *= w[i];
      if (b) out += b[i];
      y[r * C + i] = convert::convert<A, S>(out);
    }
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// *gx = v, or *gx += v where gx holds another consumer's part of the gradient (autograd's
// gradient_sink); rounded to S once either way.
template <class S, class A>
__device__ void store_gradient(S* gx, A v, bool add) {
  *gx = convert::convert<A, S>(add ? convert::convert<S, A>(*gx) + v : v);
}

// gx = rstd·(ĝ − mean_C(ĝ) − x̂·mean_C(ĝ·x̂)), ĝ = gy·w.
template <class S, class A>
__global__ void layer_norm_backward_rows(const S* gy, const S* x, const A* mean, const A* rstd, const A* w,
                                         int64_t rows, int64_t C, bool add_to_gx, S* gx) {
  TS_SHARED(A, scratch, 32);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const A mu = mean[r], rs = rstd[r];
    const auto g_hat = [&](int64_t i) {
      const A g = convert::convert<S, A>(gy[r * C + i]);
      return w ? g * w[i] : g;
    };
    A sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      const A g = g_hat(i);
      sg += g;
      sgx += g * (convert::convert<S, A>(x[r * C + i]) - mu) * rs;
    }
    const A a = block_all_reduce(sg, scratch, SumOp{}, A(0)) / A(C);
    const A b = block_all_reduce(sgx, scratch, SumOp{}, A(0)) / A(C);
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
      store_gradient(gx + r * C + i, rs * (g_hat(i) - a - (convert::convert<S, A>(x[r * C + i]) - mu) * rs * b),
                     add_to_gx);
  }
}

// The same two kernels, a warp per row of C <= kWarpRowMax values held in registers. The padding
// past C is 0 in x, and in ĝ, so the sums need no bound check; the variance's second pass skips it.
template <class S, class A, int P>
__global__ void layer_norm_warp_rows(const S* x, const A* w, const A* b, double eps, int64_t rows, int64_t C, S* y,
                                     A* mean, A* rstd) {
  const unsigned lane = threadIdx.x % 32;
  TS_WARP_ROW_LOOP(r, rows) {
    A v[P];
    load_warp_row(x + r * C, C, lane, A(0), v);
    A s = 0;
    TS_UNROLL
    for (int j = 0; j < P; ++j) s += v[j];
    const A mu = warp_all_reduce(s, SumOp{}) / A(C);
    A q = 0;  // second pass over the registers: no cancellation
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const A d = lane + 32 * static_cast<int64_t>(j) < C ? v[j] - mu : A(0);
      q += d * d;
    }
    const A rs = A(1) / dm::sqrt(warp_all_reduce(q, SumOp{}) / A(C) + A(eps));
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const int64_t i = lane + 32 * static_cast<int64_t>(j);
      if (i >= C) continue;
      A out = (v[j] - mu) * rs;
      if (w) out *= w[i];
      if (b) out += b[i];
      y[r * C + i] = convert::convert<A, S>(out);
    }
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

template <class S, class A, int P>
__global__ void layer_norm_backward_warp_rows(const S* gy, const S* x, const A* mean, const A* rstd, const A* w,
                                              int64_t rows, int64_t C, bool add_to_gx, S* gx) {
  const unsigned lane = threadIdx.x % 32;
  TS_WARP_ROW_LOOP(r, rows) {
    const A mu = mean[r], rs = rstd[r];
    A g[P], xh[P];  // ĝ = gy·w and x̂ = (x − mean)·rstd, 0 past C
    load_warp_row(gy + r * C, C, lane, A(0), g);
    load_warp_row(x + r * C, C, lane, A(0), xh);
    A sg = 0, sgx = 0;
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const int64_t i = lane + 32 * static_cast<int64_t>(j);
      if (i < C) {
        if (w) g[j] *= w[i];
        xh[j] = (xh[j] - mu) * rs;
      }
      sg += g[j];
      sgx += g[j] * xh[j];
    }
    const A a = warp_all_reduce(sg, SumOp{}) / A(C);
    const A bb = warp_all_reduce(sgx, SumOp{}) / A(C);
    TS_UNROLL
    for (int j = 0; j < P; ++j) {
      const int64_t i = lane + 32 * static_cast<int64_t>(j);
      if (i < C) store_gradient(gx + r * C + i, rs * (g[j] - a - xh[j] * bb), add_to_gx);
    }
  }
}

// partial[k][c] and partial[chunks + k][c]: Σ gy·x̂ and Σ gy over the rows of chunk k, column c.
template <class S, class A>
__global__ void layer_norm_param_partials(const S* gy, const S* x, const A* mean, const A* rstd, int64_t rows,
                                          int64_t C, int64_t chunks, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * C) {
    const int64_t k = i / C, c = i % C;
    double dw = 0, db = 0;
    for (int64_t r = k * kChunkRows; r < dm::min(rows, (k + 1) * kChunkRows); ++r) {
      const double g = convert::convert<S, A>(gy[r * C + c]);
      dw += g * static_cast<double>((convert::convert<S, A>(x[r * C + c]) - mean[r]) * rstd[r]);
      db += g;
    }
    partial[i] = dw;
    partial[chunks * C + i] = db;
  }
}

// gweight[c] and gbias[c] from the two sets of chunk partials above, in one launch: each column's
// chunks added in order, as cuda/column_sums.h does (either output may be absent).
template <class A>
__global__ void layer_norm_param_sums(const double* partial, int64_t chunks, int64_t C, A* gweight, A* gbias) {
  TS_GRID_STRIDE_LOOP(i, 2 * C) {
    const int64_t set = i / C, c = i % C;
    A* out = set == 0 ? gweight : gbias;
    if (!out) continue;
    double acc = 0;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[(set * chunks + k) * C + c];
    out[c] = static_cast<A>(acc);
  }
}

// ---- batch norm: x as [N, C, S] ------------------------------------------------------------------------
// A channel's N·S values are cut into chunks of whole planes (about kChannelChunk values); a block
// reduces one (channel, chunk) and writes its partial in double, and one thread per channel then
// combines its chunks in order. So every SM works even with few channels (one block per channel
// left most of an H100 idle on a conv stem's 48-192 channels), a chunk's index math is 32-bit, and
// the result depends on the shape alone. The statistics are one pass: each thread keeps Welford's
// (count, mean, M2) and partials merge with Chan et al.'s formula, as exact as two passes.
constexpr int64_t kChannelChunk = 8192;

struct ChannelChunks {
  int64_t N, C, S;
  int64_t planes = 1, chunks = 1;  // planes per chunk, chunks per channel
  explicit ChannelChunks(const ChannelLayout& d) : N(d.N), C(d.C), S(d.S) {
    planes = std::max<int64_t>(1, kChannelChunk / std::max<int64_t>(S, 1));
    chunks = std::max<int64_t>(1, (N + planes - 1) / planes);
  }
  TS_HOST_DEVICE int64_t blocks() const { return C * chunks; }
  // Element e of chunk k of channel c.
  __device__ int64_t offset(int64_t c, int64_t k, uint32_t e) const {
    const auto s = static_cast<uint32_t>(S);
    return ((k * planes + e / s) * C + c) * S + e % s;
  }
  __device__ uint32_t size(int64_t k) const {  // values in chunk k
    return static_cast<uint32_t>((dm::min(N, (k + 1) * planes) - k * planes) * S);
  }
};

struct Moments {
  double n = 0, mean = 0, m2 = 0;
  __device__ void add(double v) {
    n += 1;
    const double d = v - mean;
    mean += d / n;
    m2 += d * (v - mean);
  }
  __device__ void merge(const Moments& o) {
    if (o.n == 0) return;
    const double total = n + o.n, d = o.mean - mean;
    mean += d * (o.n / total);
    m2 += o.m2 + d * d * (n * o.n / total);
    n = total;
  }
};

// Merges the block's per-thread moments into thread 0's, by a tree fixed by blockDim.
__device__ Moments block_moments(Moments m, double* n, double* mean, double* m2) {
  n[threadIdx.x] = m.n, mean[threadIdx.x] = m.mean, m2[threadIdx.x] = m.m2;
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) {
      Moments a{n[threadIdx.x], mean[threadIdx.x], m2[threadIdx.x]};
      a.merge({n[threadIdx.x + half], mean[threadIdx.x + half], m2[threadIdx.x + half]});
      n[threadIdx.x] = a.n, mean[threadIdx.x] = a.mean, m2[threadIdx.x] = a.m2;
    }
  }
  __syncthreads();
  const Moments total{n[0], mean[0], m2[0]};
  __syncthreads();  // read before the next block of the loop overwrites
  return total;
}

// partial[3·(c·chunks + k) + {0, 1, 2}] = the moments of chunk k of channel c.
template <class S, class A>
__global__ void batch_norm_stats_chunks(const S* x, ChannelChunks t, double* partial) {
  TS_SHARED(double, n, kBlockThreads);
  TS_SHARED(double, mean, kBlockThreads);
  TS_SHARED(double, m2, kBlockThreads);
  for (int64_t b = blockIdx.x; b < t.blocks(); b += gridDim.x) {
    const int64_t c = b / t.chunks, k = b % t.chunks;
    Moments m;
    for (uint32_t e = threadIdx.x; e < t.size(k); e += blockDim.x)
      m.add(static_cast<double>(convert::convert<S, A>(x[t.offset(c, k, e)])));
    const Moments total = block_moments(m, n, mean, m2);
    if (threadIdx.x == 0) partial[3 * b] = total.n, partial[3 * b + 1] = total.mean, partial[3 * b + 2] = total.m2;
  }
}

template <class A>
__global__ void batch_norm_stats_combine(const double* partial, ChannelChunks t, A* mean, A* var) {
  TS_GRID_STRIDE_LOOP(c, t.C) {
    Moments m;
    for (int64_t k = 0; k < t.chunks; ++k) {
      const double* p = partial + 3 * (c * t.chunks + k);
      m.merge({p[0], p[1], p[2]});
    }
    mean[c] = static_cast<A>(m.mean);
    var[c] = static_cast<A>(m.n > 0 ? m.m2 / m.n : 0.0);
  }
}

// partial[2·(c·chunks + k) + {0, 1}] = Σ g and Σ g·(x − center[c]) over chunk k of channel c.
template <class S, class A>
__global__ void channel_grad_sums_chunks(const S* g, const S* x, const A* center, ChannelChunks t, double* partial) {
  TS_SHARED(double, scratch, 32);
  for (int64_t b = blockIdx.x; b < t.blocks(); b += gridDim.x) {
    const int64_t c = b / t.chunks, k = b % t.chunks;
    double sg = 0, sgx = 0;
    for (uint32_t e = threadIdx.x; e < t.size(k); e += blockDim.x) {
      const int64_t i = t.offset(c, k, e);
      const A gi = convert::convert<S, A>(g[i]);
      sg += static_cast<double>(gi);
      sgx += static_cast<double>(gi * (convert::convert<S, A>(x[i]) - center[c]));
    }
    sg = block_all_reduce(sg, scratch, SumOp{}, 0.0);
    sgx = block_all_reduce(sgx, scratch, SumOp{}, 0.0);
    if (threadIdx.x == 0) partial[2 * b] = sg, partial[2 * b + 1] = sgx;
  }
}

template <class A>
__global__ void channel_grad_sums_combine(const double* partial, ChannelChunks t, A* sum_g, A* sum_gxc) {
  TS_GRID_STRIDE_LOOP(c, t.C) {
    double sg = 0, sgx = 0;
    for (int64_t k = 0; k < t.chunks; ++k)
      sg += partial[2 * (c * t.chunks + k)], sgx += partial[2 * (c * t.chunks + k) + 1];
    sum_g[c] = static_cast<A>(sg);
    sum_gxc[c] = static_cast<A>(sgx);
  }
}

// out = a·alpha + b·beta + gamma per channel: a, b and out activations (S), the coefficients A.
template <class S, class A>
__global__ void channel_affine_elements(const S* a, const A* alpha, const S* b, const A* beta, const A* gamma,
                                        int64_t n, int64_t C, int64_t plane, S* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i / plane % C;
    A v = convert::convert<S, A>(a[i]) * alpha[c];
    if (b) v += convert::convert<S, A>(b[i]) * beta[c];
    if (gamma) v += gamma[c];
    out[i] = convert::convert<A, S>(v);
  }
}

// A thread per channel (ops/kernels/normalization.h's formulas; C is a few hundred at most).
template <class T>
__global__ void batch_norm_coefficients_channels(const T* mean, const T* var, const T* w, const T* b,
                                                 BatchNormMomentum m, int64_t C, T* invstd, T* scale, T* shift,
                                                 T* running_mean, T* running_var) {
  TS_GRID_STRIDE_LOOP(c, C) {
    const T is = T(1) / dm::sqrt(var[c] + T(m.eps)), k = w ? is * w[c] : is;
    invstd[c] = is;
    scale[c] = k;
    shift[c] = b ? b[c] - mean[c] * k : -(mean[c] * k);
    if (running_mean) {
      running_mean[c] = running_mean[c] * T(1.0 - m.momentum) + mean[c] * T(m.momentum);
      running_var[c] = running_var[c] * T(1.0 - m.momentum) + var[c] * T(m.momentum * m.unbias);
    }
  }
}

template <class T>
__global__ void batch_norm_backward_coefficients_channels(const T* scale, const T* invstd, const T* mean,
                                                          const T* sum_g, const T* sum_gxc, T inv_m, int64_t C, T* beta,
                                                          T* gamma, T* gweight) {
  TS_GRID_STRIDE_LOOP(c, C) {
    const T be = -(scale[c] * invstd[c] * invstd[c] * sum_gxc[c]) * inv_m;
    beta[c] = be;
    gamma[c] = -(scale[c] * sum_g[c]) * inv_m - mean[c] * be;
    if (gweight) gweight[c] = sum_gxc[c] * invstd[c];
  }
}

}  // namespace

void batch_norm_coefficients(const Tensor& mean, const Tensor& var, const Tensor& weight, const Tensor& bias,
                             const BatchNormMomentum& m, const Tensor& invstd, const Tensor& scale, const Tensor& shift,
                             const Tensor& running_mean, const Tensor& running_var) {
  const int64_t C = mean.numel();
  if (C == 0) return;
  KernelContext ctx(mean);
  TS_DISPATCH_FLOAT(mean.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    launch("batch_norm_coefficients", batch_norm_coefficients_channels<T>, blocks_for(C), kBlockThreads, 0, ctx.stream,
           mean.device_data<T>(), var.device_data<T>(), device_ptr_or_null<T>(weight), device_ptr_or_null<T>(bias), m,
           C, invstd.device_data<T>(), scale.device_data<T>(), shift.device_data<T>(),
           device_ptr_or_null<T>(running_mean), device_ptr_or_null<T>(running_var));
  });
}

void batch_norm_backward_coefficients(const Tensor& scale, const Tensor& invstd, const Tensor& mean,
                                      const Tensor& sum_g, const Tensor& sum_gxc, double inv_m, const Tensor& beta,
                                      const Tensor& gamma, const Tensor& gweight) {
  const int64_t C = scale.numel();
  if (C == 0) return;
  KernelContext ctx(scale);
  TS_DISPATCH_FLOAT(scale.dtype(), "batch_norm_backward", [&] {
    using T = scalar_t;
    launch("batch_norm_backward_coefficients", batch_norm_backward_coefficients_channels<T>, blocks_for(C),
           kBlockThreads, 0, ctx.stream, scale.device_data<T>(), invstd.device_data<T>(), mean.device_data<T>(),
           sum_g.device_data<T>(), sum_gxc.device_data<T>(), static_cast<T>(inv_m), C, beta.device_data<T>(),
           gamma.device_data<T>(), device_ptr_or_null<T>(gweight));
  });
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  if (rows == 0) return;
  KernelContext ctx(y);
  dispatch_floating(x.dtype(), "layer_norm", [&]<class S, class A>() {
    if (warp_rows(C))
      with_values_per_lane(C, [&]<int P>() {
        launch("layer_norm_warp_rows", layer_norm_warp_rows<S, A, P>, warp_row_blocks(rows), kBlockThreads, 0,
               ctx.stream, x.device_data<S>(), device_ptr_or_null<A>(weight), device_ptr_or_null<A>(bias), eps, rows, C,
               y.device_data<S>(), mean.device_data<A>(), rstd.device_data<A>());
      });
    else
      launch("layer_norm_rows", layer_norm_rows<S, A>, row_blocks(rows), kRowThreads, 0, ctx.stream, x.device_data<S>(),
             device_ptr_or_null<A>(weight), device_ptr_or_null<A>(bias), eps, rows, C, y.device_data<S>(),
             mean.device_data<A>(), rstd.device_data<A>());
  });
}

void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& gx, bool add_to_gx, const Tensor& gweight,
                         const Tensor& gbias) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  KernelContext ctx(x);
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<class S, class A>() {
    if (gx.defined() && rows > 0 && warp_rows(C))
      with_values_per_lane(C, [&]<int P>() {
        launch("layer_norm_backward_warp_rows", layer_norm_backward_warp_rows<S, A, P>, warp_row_blocks(rows),
               kBlockThreads, 0, ctx.stream, gy.device_data<S>(), x.device_data<S>(), mean.device_data<A>(),
               rstd.device_data<A>(), device_ptr_or_null<A>(weight), rows, C, add_to_gx, gx.device_data<S>());
      });
    else if (gx.defined() && rows > 0)
      launch("layer_norm_backward_rows", layer_norm_backward_rows<S, A>, row_blocks(rows), kRowThreads, 0, ctx.stream,
             gy.device_data<S>(), x.device_data<S>(), mean.device_data<A>(), rstd.device_data<A>(),
             device_ptr_or_null<A>(weight), rows, C, add_to_gx, gx.device_data<S>());
    if (!gweight.defined() && !gbias.defined()) return;
    const int64_t chunks = row_chunks(rows);
    const Tensor partial = Tensor::empty({2 * chunks * C}, DType::Float64, x.device());
    launch("layer_norm_param_partials", layer_norm_param_partials<S, A>, blocks_for(chunks * C), kBlockThreads, 0,
           ctx.stream, gy.device_data<S>(), x.device_data<S>(), mean.device_data<A>(), rstd.device_data<A>(), rows, C,
           chunks, partial.device_data<double>());
    launch("layer_norm parameter gradients", layer_norm_param_sums<A>, blocks_for(2 * C), kBlockThreads, 0, ctx.stream,
           partial.device_data<double>(), chunks, C, device_ptr_or_null<A>(gweight), device_ptr_or_null<A>(gbias));
  });
}

void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const ChannelLayout d = channel_layout(x);
  if (d.C == 0) return;
  KernelContext ctx(x);
  const ChannelChunks t(d);
  const Tensor partial = Tensor::empty({3 * t.blocks()}, DType::Float64, x.device());
  dispatch_floating(x.dtype(), "batch_norm", [&]<class S, class A>() {
    launch("batch_norm_stats", batch_norm_stats_chunks<S, A>, row_blocks(t.blocks()), kBlockThreads, 0, ctx.stream,
           x.device_data<S>(), t, partial.device_data<double>());
    launch("batch_norm_stats (channels)", batch_norm_stats_combine<A>, blocks_for(d.C), kBlockThreads, 0, ctx.stream,
           partial.device_data<double>(), t, mean.device_data<A>(), var.device_data<A>());
  });
}

void channel_grad_sums(const Tensor& g, const Tensor& x, const Tensor& center, const Tensor& sum_g,
                       const Tensor& sum_gxc) {
  const ChannelLayout d = channel_layout(x);
  if (d.C == 0) return;
  KernelContext ctx(x);
  const ChannelChunks t(d);
  const Tensor partial = Tensor::empty({2 * t.blocks()}, DType::Float64, x.device());
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class S, class A>() {
    launch("channel_grad_sums", channel_grad_sums_chunks<S, A>, row_blocks(t.blocks()), kBlockThreads, 0, ctx.stream,
           g.device_data<S>(), x.device_data<S>(), center.device_data<A>(), t, partial.device_data<double>());
    launch("channel_grad_sums (channels)", channel_grad_sums_combine<A>, blocks_for(d.C), kBlockThreads, 0, ctx.stream,
           partial.device_data<double>(), t, sum_g.device_data<A>(), sum_gxc.device_data<A>());
  });
}

void channel_affine(const Tensor& a, const Tensor& alpha, const Tensor& b, const Tensor& beta, const Tensor& gamma,
                    const Tensor& out) {
  const ChannelLayout d = channel_layout(a);
  const int64_t n = a.numel();
  if (n == 0) return;
  KernelContext ctx(out);
  dispatch_floating(a.dtype(), "batch_norm", [&]<class S, class A>() {
    launch("channel_affine", channel_affine_elements<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream,
           a.device_data<S>(), alpha.device_data<A>(), device_ptr_or_null<S>(b), device_ptr_or_null<A>(beta),
           device_ptr_or_null<A>(gamma), n, d.C, d.S, out.device_data<S>());
  });
}

}  // namespace tessera::cuda
