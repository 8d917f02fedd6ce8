// CUDA kernels of layer_scale_residual (ops/kernels/layer_scale_residual.h; formulas as
// ops/cpu/layer_scale_residual.cpp): the forward is one element-wise pass over [rows, C]; the
// backward writes its element-wise gradient in the same pass that adds the per-column sums of its
// parameter gradient into fixed chunks of rows (cuda/column_sums.h), so the parameter gradient is
// deterministic and needs no atomics. Beside bfloat16/float16 activations gamma, the per-sample
// scale and gamma's gradient are float32 (core/dtype.h accumulate_dtype), the arithmetic too.
#include "tessera/cuda/column_sums.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/layer_scale_residual.h"

namespace tessera::cuda {

namespace {

// ---- residual + LayerScale ---------------------------------------------------------------------

template <class S, class A>
__global__ void layer_scale_residual_elements(const S* x, const S* f, const A* gamma, const A* s, RowLayout d, S* y) {
  TS_GRID_STRIDE_LOOP(i, d.rows * d.C) {
    const int64_t r = i / d.C, c = i % d.C;
    const A scale = s ? s[r / d.per_sample] : A(1);
    y[i] = convert::convert<A, S>(convert::convert<S, A>(x[i]) + (scale * gamma[c]) * convert::convert<S, A>(f[i]));
  }
}

// gf = g·s·gamma (when gf is given); partial[k·C + c] = Σ g·s·f over the rows of chunk k.
template <class S, class A>
__global__ void layer_scale_residual_grads(const S* g, const S* f, const A* gamma, const A* s, RowLayout d,
                                           int64_t chunks, S* gf, double* partial) {
  TS_GRID_STRIDE_LOOP(i, chunks * d.C) {
    const int64_t k = i / d.C, c = i % d.C;
    double acc = 0;
    for (int64_t r = k * kChunkRows; r < dm::min(d.rows, (k + 1) * kChunkRows); ++r) {
      const A scale = s ? s[r / d.per_sample] : A(1);
      const A gi = convert::convert<S, A>(g[r * d.C + c]);
      if (gf) gf[r * d.C + c] = convert::convert<A, S>((scale * gamma[c]) * gi);
      if (partial) acc += static_cast<double>(scale * gi * convert::convert<S, A>(f[r * d.C + c]));
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
  dispatch_floating(x.dtype(), "layer_scale_residual", [&]<class S, class A>() {
    launch("layer_scale_residual", layer_scale_residual_elements<S, A>, blocks_for(d.rows * d.C), kBlockThreads, 0,
           ctx.stream, x.device_data<S>(), f.device_data<S>(), gamma.device_data<A>(),
           device_ptr_or_null<A>(sample_scale), d, y.device_data<S>());
  });
}

void layer_scale_residual_backward(const Tensor& g, const Tensor& f, const Tensor& gamma, const Tensor& sample_scale,
                                   const Tensor& gf, const Tensor& ggamma) {
  const RowLayout d = row_layout(f, sample_scale);
  if (!gf.defined() && !ggamma.defined()) return;
  KernelContext ctx(f);
  dispatch_floating(f.dtype(), "layer_scale_residual_backward", [&]<class S, class A>() {
    const int64_t chunks = row_chunks(d.rows);
    Tensor partial;
    if (ggamma.defined()) partial = Tensor::empty({chunks * d.C}, DType::Float64, f.device());
    if (d.C == 0) return;
    launch("layer_scale_residual_backward", layer_scale_residual_grads<S, A>, blocks_for(chunks * d.C), kBlockThreads,
           0, ctx.stream, g.device_data<S>(), f.device_data<S>(), gamma.device_data<A>(),
           device_ptr_or_null<A>(sample_scale), d, chunks, device_ptr_or_null<S>(gf),
           device_ptr_or_null<double>(partial));
    if (ggamma.defined())
      launch("layer_scale_residual gamma gradient", sum_column_chunks<A>, blocks_for(d.C), kBlockThreads, 0, ctx.stream,
             partial.device_data<double>(), chunks, d.C, ggamma.device_data<A>());
  });
}

}  // namespace tessera::cuda
