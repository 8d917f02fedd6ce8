// CUDA kernels of the fused softmax cross-entropy (formulas in ops/kernels/loss.h, semantics as
// ops/cpu/loss.cpp): one block per row of C logits. A hard target outside [0, C) has been reported
// to the device's check record by the front end (ops/kernels/checks.h); the kernels skip such a row
// rather than read outside it.
#include <algorithm>
#include <limits>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/loss.h"

namespace tessera::cuda {

namespace {

// hard: targets (int64) or null; soft: q [N, C] or null.
template <class T>
__global__ void cross_entropy_rows(const T* x, const int64_t* targets, const T* q, double eps, int64_t N, int64_t C,
                                   T* loss, T* lse) {
  TS_SHARED(T, scratch, 32);
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T* xr = x + r * C;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) m = dm::max(m, xr[i]);
    m = block_all_reduce(m, scratch, MaxOp{}, -std::numeric_limits<T>::infinity());
    T se = 0, sx = 0, sq = 0, sqx = 0;  // Σ exp(x − m), Σ x, Σ q, Σ q·(m − x)
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      se += dm::exp(xr[i] - m);
      if (targets) {
        sx += xr[i];
      } else {
        sq += q[r * C + i];
        sqx += q[r * C + i] * (m - xr[i]);
      }
    }
    const T log_se = dm::log(block_all_reduce(se, scratch, SumOp{}, T(0)));
    if (targets) {
      sx = block_all_reduce(sx, scratch, SumOp{}, T(0));
      if (threadIdx.x == 0) {
        const int64_t t = targets[r];
        const T e = T(eps);
        // (1−ε)(lse − x_t) + ε(lse − mean x); an invalid target (reported at the next sync) gives NaN.
        loss[r] = t >= 0 && t < C ? log_se + (T(1) - e) * (m - xr[t]) + (e > T(0) ? e * (m - sx / T(C)) : T(0))
                                  : std::numeric_limits<T>::quiet_NaN();
      }
    } else {
      sq = block_all_reduce(sq, scratch, SumOp{}, T(0));
      sqx = block_all_reduce(sqx, scratch, SumOp{}, T(0));
      if (threadIdx.x == 0) loss[r] = sq * log_se + sqx;
    }
    if (threadIdx.x == 0) lse[r] = m + log_se;
  }
}

// gx = scale·(s·softmax(x) − q): hard targets smoothed, soft targets as given (s = Σq).
template <class T>
__global__ void cross_entropy_backward_rows(const T* x, const int64_t* targets, const T* q, const T* lse, double eps,
                                            const T* grad_scale, int64_t N, int64_t C, T* gx) {
  TS_SHARED(T, scratch, 32);
  const T scale = *grad_scale;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T* xr = x + r * C;
    T* gr = gx + r * C;
    if (targets) {
      const int64_t t = targets[r];
      for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
        T g = scale * (dm::exp(xr[i] - lse[r]) - T(eps / static_cast<double>(C)));
        if (i == t) g -= scale * T(1.0 - eps);
        gr[i] = g;
      }
    } else {
      T sq = 0;
      for (int64_t i = threadIdx.x; i < C; i += blockDim.x) sq += q[r * C + i];
      sq = block_all_reduce(sq, scratch, SumOp{}, T(0));
      for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
        gr[i] = scale * (sq * dm::exp(xr[i] - lse[r]) - q[r * C + i]);
    }
  }
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& target, double eps, const Tensor& loss, const Tensor& lse) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  KernelContext ctx(logits);
  const bool hard = target.dtype() == DType::Int64;
  TS_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] {
    launch("cross_entropy", cross_entropy_rows<scalar_t>, row_blocks(N), kRowThreads, 0, ctx.stream,
           logits.device_data<scalar_t>(), hard ? target.device_data<int64_t>() : nullptr,
           hard ? nullptr : target.device_data<scalar_t>(), eps, N, C, loss.device_data<scalar_t>(),
           lse.device_data<scalar_t>());
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, double eps,
                            const Tensor& grad_scale, const Tensor& gx) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  KernelContext ctx(logits);
  const bool hard = target.dtype() == DType::Int64;
  const Tensor scale = grad_scale.contiguous();
  TS_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward", [&] {
    launch("cross_entropy_backward", cross_entropy_backward_rows<scalar_t>, row_blocks(N), kRowThreads, 0, ctx.stream,
           logits.device_data<scalar_t>(), hard ? target.device_data<int64_t>() : nullptr,
           hard ? nullptr : target.device_data<scalar_t>(), lse.device_data<scalar_t>(), eps,
           scale.device_data<scalar_t>(), N, C, gx.device_data<scalar_t>());
  });
}

}  // namespace tessera::cuda
