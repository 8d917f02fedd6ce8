// CUDA kernels of the fused ops (ops/kernels/fused.h; formulas as ops/cpu/fused.cpp).
//   - residual + LayerScale and bias + GELU: each forward is one element-wise pass over [rows, C];
//     each backward writes its element-wise gradient in the same pass that adds the per-column sums
//     of its parameter gradient into fixed chunks of rows (cuda/column_sums.h), so the parameter
//     gradients are deterministic and need no atomics;
//   - XCA's map: a thread per row of the small d×d matrices (d is 32 to 64), the backward's column
//     terms in a second pass with a thread per column, adding the rows in order;
//   - CoaT's attention output and UFO-ViT's scaled queries: a thread per element, reading and
//     writing through the operands' strides (UFO's backward a thread per row, for its row sums);
//   - class attention: a block per (sample, head), a thread per token, then per channel.
#include <limits>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/unary_math.h"
#include "tessera/ops/kernels/fused.h"

namespace tessera::cuda {

namespace {

struct RowLayout {
  int64_t rows, C, per_sample;  // per_sample: rows that share one entry of the sample scale
};

RowLayout row_layout(const Tensor& t, const Tensor& sample_scale) {
  const int64_t C = t.shape().back(), rows = C > 0 ? t.numel() / C : 0;
  return {rows, C, sample_scale.defined() && sample_scale.numel() > 0 ? rows / sample_scale.numel() : rows};
}

UnaryArgs gelu_args(bool approximate) { return {approximate ? UnaryOp::GeluTanh : UnaryOp::GeluErf}; }

// ---- residual + LayerScale ---------------------------------------------------------------------

template <class T>
__global__ void layer_scale_residual_elements(const T* x, const T* f, const T* gamma, const T* s, RowLayout d, T* y) {
  TS_GRID_STRIDE_LOOP(i, d.rows * d.C) {
    const int64_t r = i / d.C, c = i % d.C;
    const T scale = s ? s[r / d.per_sample] : T(1);
    y[i] = x[i] + (scale * gamma[c]) * f[i];
  }
}

// gf = g·s·gamma (when gf is given); partial[k·C + c] = Σ g·s·f over the rows of chunk k.
template <class T>
__global__ void layer_scale_residual_grads(const T* g, const T* f, const T* gamma, const T* s, RowLayout d,
                                           int64_t chunks, T* gf, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * d.C) {
    const int64_t k = i / d.C, c = i % d.C;
    double acc = 0;
    for (int64_t r = k * kChunkRows; r < dm::min(d.rows, (k + 1) * kChunkRows); ++r) {
      const T scale = s ? s[r / d.per_sample] : T(1);
      const T gi = g[r * d.C + c];
      if (gf) gf[r * d.C + c] = (scale * gamma[c]) * gi;
      if (partial) acc += static_cast<double>(scale * gi * f[r * d.C + c]);
    }
    if (partial) partial[i] = acc;
  }
}

}  // namespace

void layer_scale_residual(const Tensor& x, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                          const Tensor& y) {
  const RowLayout d = row_layout(x, sample_scale);
  if (d.rows * d.C == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(x.dtype(), "layer_scale_residual", [&] {
    using T = scalar_t;
    launch("layer_scale_residual", layer_scale_residual_elements<T>, blocks_for(d.rows * d.C), kBlockThreads, 0,
           ctx.stream, x.device_data<T>(), f.device_data<T>(), gamma.device_data<T>(),
           device_ptr_or_null<T>(sample_scale), d, y.device_data<T>());
  });
}

void layer_scale_residual_backward(const Tensor& g, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                                   const Tensor& gf, const Tensor& ggamma) {
  const RowLayout d = row_layout(f, sample_scale);
  if (!gf.defined() && !ggamma.defined()) return;
  KernelContext ctx(f);
  TS_DISPATCH_FLOAT(f.dtype(), "layer_scale_residual_backward", [&] {
    using T = scalar_t;
    const int64_t chunks = row_chunks(d.rows);
    Tensor partial;
    if (ggamma.defined()) partial = Tensor::empty({chunks * d.C}, DType::Float64, f.device());
    if (d.C == 0) return;
    launch("layer_scale_residual_backward", layer_scale_residual_grads<T>, blocks_for(chunks * d.C), kBlockThreads,
           0, ctx.stream, g.device_data<T>(), f.device_data<T>(), gamma.device_data<T>(),
           device_ptr_or_null<T>(sample_scale), d, chunks, device_ptr_or_null<T>(gf),
           device_ptr_or_null<double>(partial));
    if (ggamma.defined())
      launch("layer_scale_residual gamma gradient", sum_column_chunks<T>, blocks_for(d.C), kBlockThreads, 0,
             ctx.stream, partial.device_data<double>(), chunks, d.C, ggamma.device_data<T>());
  });
}

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

namespace {

// ---- XCA's map: M matrices of d×d (d, the channels per head, is small: 32 to 64 in XCiT) -----------

// One thread per row (m, i): the row's max, exponentials and sum in three sweeps over its d values.
template <class T>
__global__ void xca_attention_map_rows(const T* s, const T* nq, const T* nk, const T* t, T eps, int64_t M, int64_t d,
                                    int64_t heads, T* a) {
  TS_GRID_STRIDE_LOOP(r, M * d) {
    const int64_t m = r / d;
    const T scale = t[m % heads] / dm::max(nq[r], eps);
    const T* sr = s + r * d;
    const T* km = nk + m * d;
    T* ar = a + r * d;
    T top = -dm::infinity<T>();
    for (int64_t j = 0; j < d; ++j) {
      ar[j] = sr[j] * (T(1) / dm::max(km[j], eps)) * scale;
      top = dm::max(top, ar[j]);
    }
    T total = 0;
    for (int64_t j = 0; j < d; ++j) {
      ar[j] = dm::exp(ar[j] - top);
      total += ar[j];
    }
    const T inv = T(1) / total;
    for (int64_t j = 0; j < d; ++j) ar[j] *= inv;
  }
}

// Rows (m, i): gs and row_terms; each row's Σ_j ga·a kept in `dots` for the column pass.
template <class T>
__global__ void xca_attention_map_backward_rows(const T* ga, const T* a, const T* s, const T* nq, const T* nk, const T* t,
                                             T eps, int64_t M, int64_t d, int64_t heads, T* gs, T* row_terms, T* dots) {
  TS_GRID_STRIDE_LOOP(r, M * d) {
    const int64_t m = r / d;
    const T* km = nk + m * d;
    T dot = 0;
    for (int64_t j = 0; j < d; ++j) dot += ga[r * d + j] * a[r * d + j];
    const T inv_q = T(1) / dm::max(nq[r], eps), temp = t[m % heads];
    T acc = 0;
    for (int64_t j = 0; j < d; ++j) {
      const T inv_k = T(1) / dm::max(km[j], eps);
      const T gz = a[r * d + j] * (ga[r * d + j] - dot);
      gs[r * d + j] = gz * temp * inv_k * inv_q;
      acc += gz * (s[r * d + j] * inv_k * inv_q);
    }
    row_terms[r] = acc;
    dots[r] = dot;
  }
}

// Columns (m, j): col_terms = Σ_i gz·c over the rows in order, in double.
template <class T>
__global__ void xca_attention_map_backward_columns(const T* ga, const T* a, const T* s, const T* nq, const T* nk, T eps,
                                                const T* dots, int64_t M, int64_t d, T* col_terms) {
  TS_GRID_STRIDE_LOOP(col, M * d) {
    const int64_t m = col / d, j = col % d;
    const T inv_k = T(1) / dm::max(nk[col], eps);
    double acc = 0;
    for (int64_t i = 0; i < d; ++i) {
      const int64_t e = (m * d + i) * d + j;
      const T gz = a[e] * (ga[e] - dots[m * d + i]);
      acc += static_cast<double>(gz * (s[e] * inv_k / dm::max(nq[m * d + i], eps)));
    }
    col_terms[col] = static_cast<T>(acc);
  }
}

}  // namespace

void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps, const Tensor& a) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map", [&] {
    using T = scalar_t;
    launch("xca_attention_map", xca_attention_map_rows<T>, blocks_for(M * d), kBlockThreads, 0, ctx.stream,
           s.device_data<T>(), nq.device_data<T>(), nk.device_data<T>(), t.device_data<T>(), static_cast<T>(eps), M,
           d, t.numel(), a.device_data<T>());
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                             const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                             const Tensor& col_terms) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  TS_DISPATCH_FLOAT(s.dtype(), "xca_attention_map_backward", [&] {
    using T = scalar_t;
    const Tensor dots = Tensor::empty({M * d}, s.dtype(), s.device());
    launch("xca_attention_map_backward rows", xca_attention_map_backward_rows<T>, blocks_for(M * d), kBlockThreads, 0,
           ctx.stream, ga.device_data<T>(), a.device_data<T>(), s.device_data<T>(), nq.device_data<T>(),
           nk.device_data<T>(), t.device_data<T>(), static_cast<T>(eps), M, d, t.numel(), gs.device_data<T>(),
           row_terms.device_data<T>(), dots.device_data<T>());
    launch("xca_attention_map_backward columns", xca_attention_map_backward_columns<T>, blocks_for(M * d), kBlockThreads,
           0, ctx.stream, ga.device_data<T>(), a.device_data<T>(), s.device_data<T>(), nq.device_data<T>(),
           nk.device_data<T>(), static_cast<T>(eps), dots.device_data<T>(), M, d, col_terms.device_data<T>());
  });
}

namespace {

// ---- CoaT's attention output: a thread per element of the token-layout output ---------------------

struct HeadShape {
  int64_t B, H, N, d;  // samples, heads, tokens, channels per head
};
HeadShape head_shape(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.size(3)}; }

template <class T>
__global__ void factor_attention_merge_elements(const T* m, Strides4 mo, const T* q, Strides4 qo, const T* cv,
                                                Strides4 co, HeadShape sh, T scale, T* y) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.N * sh.H * sh.d) {
    const int64_t c = i % sh.d, h = (i / sh.d) % sh.H, r = i / (sh.d * sh.H), b = r / sh.N, n = r % sh.N;
    const T attended = m[mo(b, h, n, c)] * scale;
    y[i] = n == 0 ? attended : attended + q[qo(b, h, n, c)] * cv[co(b, h, n - 1, c)];
  }
}

template <class T>
__global__ void factor_attention_merge_grads(const T* g, const T* q, Strides4 qo, const T* cv, Strides4 co,
                                             HeadShape sh, T scale, T* gm, T* gq, T* gcv) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.N * sh.H * sh.d) {
    const int64_t c = i % sh.d, h = (i / sh.d) % sh.H, r = i / (sh.d * sh.H), b = r / sh.N, n = r % sh.N;
    const T gv = g[i];
    const int64_t at = ((b * sh.H + h) * sh.N + n) * sh.d + c;
    if (gm) gm[at] = gv * scale;
    if (gq) gq[at] = n == 0 ? T(0) : gv * cv[co(b, h, n - 1, c)];
    if (gcv && n > 0) gcv[((b * sh.H + h) * (sh.N - 1) + n - 1) * sh.d + c] = gv * q[qo(b, h, n, c)];
  }
}

}  // namespace

void factor_attention_merge(const Tensor& m, const Tensor& q, const Tensor& cv, double scale, const Tensor& y) {
  const int64_t n = y.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(m.dtype(), "factor_attention_merge", [&] {
    using T = scalar_t;
    launch("factor_attention_merge", factor_attention_merge_elements<T>, blocks_for(n), kBlockThreads, 0, ctx.stream,
           m.device_data<T>(), strides4(m), q.device_data<T>(), strides4(q), cv.device_data<T>(), strides4(cv),
           head_shape(m), static_cast<T>(scale), y.device_data<T>());
  });
}

void factor_attention_merge_backward(const Tensor& g, const Tensor& q, const Tensor& cv, double scale, const Tensor& gm,
                                     const Tensor& gq, const Tensor& gcv) {
  const int64_t n = g.numel();
  if (n == 0) return;
  KernelContext ctx(g);
  TS_DISPATCH_FLOAT(q.dtype(), "factor_attention_merge_backward", [&] {
    using T = scalar_t;
    launch("factor_attention_merge_backward", factor_attention_merge_grads<T>, blocks_for(n), kBlockThreads, 0,
           ctx.stream, g.device_data<T>(), q.device_data<T>(), strides4(q), cv.device_data<T>(), strides4(cv),
           head_shape(q), static_cast<T>(scale), device_ptr_or_null<T>(gm), device_ptr_or_null<T>(gq),
           device_ptr_or_null<T>(gcv));
  });
}

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

void class_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& a, const Tensor& y) {
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
    launch("class_attention_backward", class_attention_grads<T>, row_blocks(sh.B * sh.H), kRowThreads, 0,
           ctx.stream, g.device_data<T>(), strides4(g), q.device_data<T>(), strides4(q), k.device_data<T>(),
           strides4(k), v.device_data<T>(), strides4(v), a.device_data<T>(), sh, static_cast<T>(scale),
           gz.device_data<T>(), device_ptr_or_null<T>(gq), strides4(gq), device_ptr_or_null<T>(gk), strides4(gk),
           device_ptr_or_null<T>(gv), strides4(gv));
  });
}

namespace {

// ---- UFO-ViT's XNorm of the queries: forward a thread per element, backward a thread per row -------

template <class T>
__global__ void xnorm_matmul_elements(const T* p, const T* nq, const T* gamma, HeadShape sh, T eps, T* y,
                                        Strides4 yo) {
  TS_GRID_STRIDE_LOOP(i, sh.B * sh.H * sh.N * sh.d) {
    const int64_t r = i / sh.d, c = i % sh.d, b = r / (sh.H * sh.N), h = r / sh.N % sh.H, n = r % sh.N;
    y[yo(b, h, n, c)] = (gamma[h] / dm::max(nq[r], eps)) * p[i];
  }
}

template <class T>
__global__ void xnorm_matmul_grads(const T* g, Strides4 go, const T* p, const T* nq, const T* gamma, HeadShape sh,
                                     T eps, T* gp, T* row_terms) {
  TS_GRID_STRIDE_LOOP(r, sh.B * sh.H * sh.N) {
    const int64_t b = r / (sh.H * sh.N), h = r / sh.N % sh.H, n = r % sh.N;
    const T norm = dm::max(nq[r], eps), factor = gamma[h] / norm;
    T acc = 0;
    for (int64_t c = 0; c < sh.d; ++c) {
      const T gv = g[go(b, h, n, c)];
      gp[r * sh.d + c] = factor * gv;
      acc += gv * p[r * sh.d + c];
    }
    row_terms[r] = acc / norm;
  }
}

}  // namespace

void xnorm_matmul(const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps, const Tensor& y) {
  const int64_t n = p.numel();
  if (n == 0) return;
  KernelContext ctx(y);
  TS_DISPATCH_FLOAT(p.dtype(), "xnorm_matmul", [&] {
    using T = scalar_t;
    launch("xnorm_matmul", xnorm_matmul_elements<T>, blocks_for(n), kBlockThreads, 0, ctx.stream,
           p.device_data<T>(), nq.device_data<T>(), gamma.device_data<T>(), head_shape(p), static_cast<T>(eps),
           y.device_data<T>(), strides4(y));
  });
}

void xnorm_matmul_backward(const Tensor& g, const Tensor& p, const Tensor& nq, const Tensor& gamma, double eps,
                             const Tensor& gp, const Tensor& row_terms) {
  const int64_t rows = nq.numel();
  if (rows == 0) return;
  KernelContext ctx(gp);
  TS_DISPATCH_FLOAT(p.dtype(), "xnorm_matmul_backward", [&] {
    using T = scalar_t;
    launch("xnorm_matmul_backward", xnorm_matmul_grads<T>, blocks_for(rows), kBlockThreads, 0, ctx.stream,
           g.device_data<T>(), strides4(g), p.device_data<T>(), nq.device_data<T>(), gamma.device_data<T>(),
           head_shape(p), static_cast<T>(eps), gp.device_data<T>(), row_terms.device_data<T>());
  });
}

}  // namespace tessera::cuda
