// CUDA kernels of the optimizer family (formulas in ops/optim.h, the same arithmetic as
// ops/cpu/optim.cpp): each call is ONE launch over every tensor of its lists (cuda/tensor_table.h);
// an AdamW step with gradient clipping and the model EMA fused (AdamFusion) is still one launch.
// The sum of squares adds fixed chunks of the concatenation in double, then the chunks in order,
// so its result depends on the data only, not on the launch shape.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/tensor_table.h"
#include "tessera/ops/kernels/copy.h"
#include "tessera/ops/kernels/optim.h"

namespace tessera::cuda {

namespace {

constexpr int64_t kChunk = 65536;  // elements per partial sum of squares
constexpr unsigned kReduceThreads = 256;

// adam_constants' double arithmetic, on the host (for a launch's arguments) or in a thread.
struct DoubleMath {
  TS_HOST_DEVICE double pow(double x, double y) const {
#if defined(__CUDA_ARCH__)
    return ::pow(x, y);
#else
    return std::pow(x, y);
#endif
  }
  TS_HOST_DEVICE double sqrt(double x) const {
#if defined(__CUDA_ARCH__)
    return ::sqrt(x);
#else
    return std::sqrt(x);
#endif
  }
};

// x·y rounded to T on its own, as scale_ stores it before a separate step reads it: a fused
// multiply-add must not fold the clipped gradient's product into Adam's L2 term (g + wd·p), or a
// fused step would differ from scale_ + step in the last bit. nvcc contracts by default, and so
// does the host compiler that builds the emulator.
template <class T>
__device__ __forceinline__ T rounded_product(T x, T y) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __fmul_rn(x, y);
  else return __dmul_rn(x, y);
#else
  const volatile T product = x * y;  // a volatile store rounds, and nothing is fused across it
  return product;
#endif
}

// torch.lerp's formula and choice of end (from the nearer end, for accuracy near 0 and 1): lerp_
// and the EMA of a fused AdamW step.
template <class T>
struct LerpConstants {
  T w, w1;
  bool from_self;
  __device__ T operator()(T self, T end) const { return from_self ? self + w * (end - self) : end - (end - self) * w1; }
};

template <class T>
TS_HOST_DEVICE LerpConstants<T> lerp_constants(double weight) {
  return {T(weight), T(1.0 - weight), weight < 0.5};
}

// One Adam(W) step per element. grad_scale (null: none) multiplies each gradient as scale_ would;
// with an EMA (list 4 of the table), the EMA element follows its updated parameter as lerp_ would.
// With step_values (lr, step, ema_weight in device memory: AdamFusion::step_values), the
// constants are computed from them here, when the launch runs, rather than passed in.
template <class T>
__global__ void adam_elements(TensorTable table, int64_t total, AdamConstants<T> c, const double* grad_scale,
                              bool has_ema, LerpConstants<T> ema, AdamConfig config, const double* step_values) {
  if (step_values) {
    c = adam_constants<T>(config, step_values[0], step_values[1], DoubleMath{});
    ema = lerp_constants<T>(step_values[2]);
  }
  const T f = grad_scale ? static_cast<T>(*grad_scale) : T(1);
  TS_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = table.tensor_of(e), k = e - table.start[i];
    T& P = table.at<T>(0, i)[k];
    const T g = grad_scale ? rounded_product(table.at<T>(1, i)[k], f) : table.at<T>(1, i)[k];
    T& M = table.at<T>(2, i)[k];
    T& V = table.at<T>(3, i)[k];
    const T G = c.coupled ? g + c.coupled_wd * P : g;  // Adam's L2 term
    M = c.b1 * M + c.one_b1 * G;
    V = c.b2 * V + c.one_b2 * (G * G);
    P = P * c.decay - c.step_size * (M / (dm::sqrt(V) / c.bc2_sqrt + c.eps));
    if (has_ema) {
      T& A = table.at<T>(4, i)[k];
      A = ema(A, P);
    }
  }
}

template <class T>
struct SgdConstants {
  T lr, momentum, one_damp, wd;
  bool decay, nesterov, first_step, has_buffers;
};

template <class T>
__global__ void sgd_elements(TensorTable table, int64_t total, SgdConstants<T> c) {
  TS_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = table.tensor_of(e), k = e - table.start[i];
    T& P = table.at<T>(0, i)[k];
    const T g = table.at<T>(1, i)[k];
    const T D = c.decay ? g + c.wd * P : g;
    if (!c.has_buffers) {
      P = P - c.lr * D;
      continue;
    }
    T& B = table.at<T>(2, i)[k];
    B = c.first_step ? D : c.momentum * B + c.one_damp * D;
    P = P - c.lr * (c.nesterov ? D + c.momentum * B : B);
  }
}

template <class T>
__global__ void scale_elements(TensorTable table, int64_t total, const double* factor) {
  const T f = static_cast<T>(*factor);
  TS_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = table.tensor_of(e);
    table.at<T>(0, i)[e - table.start[i]] *= f;
  }
}

template <class T>
__global__ void lerp_elements(TensorTable table, int64_t total, LerpConstants<T> lerp) {
  TS_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = table.tensor_of(e), k = e - table.start[i];
    T& s = table.at<T>(0, i)[k];
    s = lerp(s, table.at<T>(1, i)[k]);
  }
}

// x ← x·inv_scale; a thread that meets a non-finite value sets the flag (every such thread writes
// the same 1, so the result does not depend on which).
template <class T>
__global__ void unscale_elements(TensorTable table, int64_t total, const double* inv_scale, double* found_inf) {
  const T f = static_cast<T>(*inv_scale);
  TS_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = table.tensor_of(e);
    T& x = table.at<T>(0, i)[e - table.start[i]];
    if (!dm::is_finite(x)) *found_inf = 1.0;
    x *= f;
  }
}

// partial[b] = Σ x² over chunk b of the concatenation; one block per chunk.
template <class T>
__global__ void sum_squares_chunks(TensorTable table, int64_t total, double* partial) {
  TS_SHARED(double, scratch, 32);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kChunk, end = dm::min(total, begin + kChunk);
  double acc = 0;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const int64_t i = table.tensor_of(e);
    const double v = table.at<T>(0, i)[e - table.start[i]];
    acc += v * v;
  }
  acc = block_all_reduce(acc, scratch, SumOp{}, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void sum_partials(const double* partial, int64_t count, double* out) {
  TS_SHARED(double, scratch, 32);
  double acc = 0;
  for (int64_t b = threadIdx.x; b < count; b += blockDim.x) acc += partial[b];
  acc = block_all_reduce(acc, scratch, SumOp{}, 0.0);
  if (threadIdx.x == 0) *out = acc;
}

}  // namespace

void adam(const AdamConfig& c, int64_t step, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
          const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, const AdamFusion& fusion) {
  const bool has_ema = !fusion.emas.empty();
  const DeviceTable table = has_ema ? upload_table({&params, &grads, &exp_avgs, &exp_avg_sqs, &fusion.emas})
                                    : upload_table({&params, &grads, &exp_avgs, &exp_avg_sqs});
  if (table.total == 0) return;
  const double* grad_scale = fusion.grad_scale.defined() ? fusion.grad_scale.device_data<double>() : nullptr;
  KernelContext ctx(params.front());
  const double* step_values = fusion.step_values.defined() ? fusion.step_values.device_data<double>() : nullptr;
  TS_DISPATCH_FLOAT(params.front().dtype(), "adamw_update_", [&] {
    using T = scalar_t;
    launch("adamw_update_", adam_elements<T>, blocks_for(table.total), kBlockThreads, 0, ctx.stream, table.view(),
           table.total, adam_constants<T>(c, c.lr, static_cast<double>(step), DoubleMath{}), grad_scale, has_ema,
           lerp_constants<T>(fusion.ema_weight), c, step_values);
  });
}

void sgd(const SgdConfig& c, bool first_step, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
         const std::vector<Tensor>& bufs) {
  const bool has_buffers = !bufs.empty();
  const DeviceTable table = has_buffers ? upload_table({&params, &grads, &bufs}) : upload_table({&params, &grads});
  if (table.total == 0) return;
  KernelContext ctx(params.front());
  TS_DISPATCH_FLOAT(params.front().dtype(), "sgd_update_", [&] {
    using T = scalar_t;
    const SgdConstants<T> k{T(c.lr),    T(c.momentum), T(1.0 - c.dampening), T(c.weight_decay), c.weight_decay != 0.0,
                            c.nesterov, first_step,    has_buffers};
    launch("sgd_update_", sgd_elements<T>, blocks_for(table.total), kBlockThreads, 0, ctx.stream, table.view(),
           table.total, k);
  });
}

void sum_squares(const std::vector<Tensor>& tensors, const Tensor& out) {
  KernelContext ctx(out);
  const DeviceTable table = upload_table({&tensors});
  if (table.total == 0) {
    fill_kernel[out.device()](out, 0.0);
    return;
  }
  const int64_t chunks = (table.total + kChunk - 1) / kChunk;
  const Tensor partial = Tensor::empty({chunks}, DType::Float64, out.device());
  TS_DISPATCH_FLOAT(tensors.front().dtype(), "sum_of_squares", [&] {
    launch("sum_of_squares", sum_squares_chunks<scalar_t>, static_cast<unsigned>(chunks), kReduceThreads, 0, ctx.stream,
           table.view(), table.total, partial.device_data<double>());
  });
  launch("sum_of_squares (total)", sum_partials, 1, kReduceThreads, 0, ctx.stream, partial.device_data<double>(),
         chunks, out.device_data<double>());
}

void scale(const std::vector<Tensor>& tensors, const Tensor& factor) {
  const DeviceTable table = upload_table({&tensors});
  if (table.total == 0) return;
  KernelContext ctx(tensors.front());
  TS_DISPATCH_FLOAT(tensors.front().dtype(), "scale_", [&] {
    launch("scale_", scale_elements<scalar_t>, blocks_for(table.total), kBlockThreads, 0, ctx.stream, table.view(),
           table.total, factor.device_data<double>());
  });
}

void unscale(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  const DeviceTable table = upload_table({&grads});
  if (table.total == 0) return;
  KernelContext ctx(grads.front());
  TS_DISPATCH_FLOAT(grads.front().dtype(), "unscale_", [&] {
    launch("unscale_", unscale_elements<scalar_t>, blocks_for(table.total), kBlockThreads, 0, ctx.stream, table.view(),
           table.total, inv_scale.device_data<double>(), found_inf.device_data<double>());
  });
}

void lerp(const std::vector<Tensor>& selves, const std::vector<Tensor>& ends, double weight) {
  const DeviceTable table = upload_table({&selves, &ends});
  if (table.total == 0) return;
  KernelContext ctx(selves.front());
  TS_DISPATCH_FLOAT(selves.front().dtype(), "lerp_", [&] {
    launch("lerp_", lerp_elements<scalar_t>, blocks_for(table.total), kBlockThreads, 0, ctx.stream, table.view(),
           table.total, lerp_constants<scalar_t>(weight));
  });
}

}  // namespace tessera::cuda
