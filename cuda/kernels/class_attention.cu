// CUDA kernels of class_attention (ops/kernels/class_attention.h; formulas as
// ops/cpu/class_attention.cpp): a block per (sample, head), a thread per token, then per channel.
#include <limits>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/head_shape.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/class_attention.h"

namespace tessera::cuda {

namespace {

// ---- class attention: a block per (sample, head) ------------------------------------------------------
// The N scores live in the output a (global memory), so any token count fits; a thread per token
// for the scores, a thread per channel for the weighted sums (each adds the tokens in order).

template <class T>
__global__ void class_attention_rows(const T* q, Strides4 qo, const T* k, Strides4 ko, const T* v, Strides4 vo,
                                     HeadShape sh, T scale, T* a, T* y, Strides4 yo) {
  TS_SHARED(T, scratch, 32);
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    T* ar = a + r * sh.N;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) {
      T dot = 0;
      for (int64_t c = 0; c < sh.d; ++c) dot += q[qo(b, h, 0, c)] * k[ko(b, h, n, c)];
      ar[n] = dot * scale;
      mx = dm::max(mx, ar[n]);
    }
    mx = block_all_reduce(mx, scratch, MaxOp{}, -std::numeric_limits<T>::infinity());
    T total = 0;
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) total += (ar[n] = dm::exp(ar[n] - mx));
    total = block_all_reduce(total, scratch, SumOp{}, T(0));
    const T inv = T(1) / total;
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) ar[n] *= inv;
    __syncthreads();  // every weight is final before any thread sums them
    for (int64_t c = threadIdx.x; c < sh.d; c += blockDim.x) {
      T acc = 0;
      for (int64_t n = 0; n < sh.N; ++n) acc += ar[n] * v[vo(b, h, n, c)];
      y[yo(b, h, 0, c)] = acc;
    }
  }
}

// gz [B·h·N] is scratch for the softmax's input gradient.
template <class T>
__global__ void class_attention_grads(const T* g, Strides4 go, const T* q, Strides4 qo, const T* k, Strides4 ko,
                                      const T* v, Strides4 vo, const T* a, HeadShape sh, T scale, T* gz, T* gq,
                                      Strides4 gqo, T* gk, Strides4 gko, T* gv, Strides4 gvo) {
  TS_SHARED(T, scratch, 32);
  for (int64_t r = blockIdx.x; r < sh.B * sh.H; r += gridDim.x) {
    const int64_t b = r / sh.H, h = r % sh.H;
    const T* ar = a + r * sh.N;
    T* zr = gz + r * sh.N;
    T weighted = 0;  // Σ_n a_n·ga_n
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) {
      T ga = 0;
      for (int64_t c = 0; c < sh.d; ++c) ga += g[go(b, h, 0, c)] * v[vo(b, h, n, c)];
      zr[n] = ga;
      weighted += ar[n] * ga;
    }
    weighted = block_all_reduce(weighted, scratch, SumOp{}, T(0));
    for (int64_t n = threadIdx.x; n < sh.N; n += blockDim.x) zr[n] = ar[n] * (zr[n] - weighted);
    __syncthreads();  // every gz_n is final before the sums over the tokens
    if (gq)
      for (int64_t c = threadIdx.x; c < sh.d; c += blockDim.x) {
        T acc = 0;
        for (int64_t n = 0; n < sh.N; ++n) acc += zr[n] * k[ko(b, h, n, c)];
        gq[gqo(b, h, 0, c)] = scale * acc;
      }
    for (int64_t i = threadIdx.x; i < sh.N * sh.d; i += blockDim.x) {
      const int64_t n = i / sh.d, c = i % sh.d;
      if (gk) gk[gko(b, h, n, c)] = (scale * zr[n]) * q[qo(b, h, 0, c)];
      if (gv) gv[gvo(b, h, n, c)] = ar[n] * g[go(b, h, 0, c)];
    }
  }
}

}  // namespace

void class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a,
                     const Tensor& y) {
  const HeadShape sh = head_shape(k);
  if (sh.B * sh.H == 0) return;
  KernelContext ctx(a);
  TS_DISPATCH_FLOAT(k.dtype(), "class_attention", [&] {
    using T = scalar_t;
    launch("class_attention", class_attention_rows<T>, row_blocks(sh.B * sh.H), kRowThreads, 0, ctx.stream,
           q.device_data<T>(), strides4(q), k.device_data<T>(), strides4(k), v.device_data<T>(), strides4(v), sh,
           static_cast<T>(scale), a.device_data<T>(), y.device_data<T>(), strides4(y));
  });
}

void class_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                              double scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const HeadShape sh = head_shape(k);
  if (sh.B * sh.H == 0) return;
  KernelContext ctx(a);
  const Tensor gz = Tensor::empty({sh.B * sh.H * sh.N}, a.dtype(), a.device());
  TS_DISPATCH_FLOAT(k.dtype(), "class_attention_backward", [&] {
    using T = scalar_t;
    launch("class_attention_backward", class_attention_grads<T>, row_blocks(sh.B * sh.H), kRowThreads, 0, ctx.stream,
           g.device_data<T>(), strides4(g), q.device_data<T>(), strides4(q), k.device_data<T>(), strides4(k),
           v.device_data<T>(), strides4(v), a.device_data<T>(), sh, static_cast<T>(scale), gz.device_data<T>(),
           device_ptr_or_null<T>(gq), strides4(gq), device_ptr_or_null<T>(gk), strides4(gk), device_ptr_or_null<T>(gv),
           strides4(gv));
  });
}

}  // namespace tessera::cuda
