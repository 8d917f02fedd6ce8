// CUDA kernels of the indexing family (semantics as ops/cpu/indexing.cpp): gather along a dim and
// its adjoint scatter-add. Index values outside [0, size) have been reported to the device's check
// record by the front end (ops/kernels/checks.h); these kernels skip them rather than touch memory
// outside the tensor.
//
// The scatter-add is deterministic without atomics: one thread per element q of gx adds, in index
// order, every g[p] whose index sends it to q (p = q with `dim` replaced by j, for every j along
// g's dim), exactly the order in which the CPU's serial loop adds them. bfloat16 and float16 add
// in float32.
#include "tessera/cuda/device.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/strided.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/indexing.h"

namespace tessera::cuda {

namespace {

// out[p] = x[p with dim := index[p]]: offsets of out, index and x (x's dim given stride 0, the
// index value times x's real stride is added). A pure copy of the stored values, whatever their type.
template <class T>
__global__ void gather_elements(StridedOffsets<3> layout, int64_t n, const T* x, int64_t x_dim_stride, int64_t dim_size,
                                const int64_t* index, T* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t off[3];
    layout.offsets(i, off);
    const int64_t j = index[off[1]];
    out[off[0]] = j >= 0 && j < dim_size ? x[off[2] + j * x_dim_stride] : T{};
  }
}

// Shapes and strides of the scatter-add: gx (contiguous) of shape gx_sizes; g and index of shape
// sizes, which is within gx_sizes in every dim but `dim`.
struct ScatterGeometry {
  int ndim, dim;
  int64_t gx_sizes[kMaxDims], sizes[kMaxDims], g_strides[kMaxDims], index_strides[kMaxDims];
};

template <class S, class A>
__global__ void scatter_add_elements(ScatterGeometry s, int64_t n, const S* g, const int64_t* index, S* gx) {
  TS_GRID_STRIDE_LOOP(q, n) {
    // Coordinates of q in gx; g's and index's offsets with the coordinate of `dim` set to 0.
    int64_t rest = q, g_base = 0, i_base = 0, target = 0;
    bool inside = true;
    for (int d = s.ndim - 1; d >= 0; --d) {
      const int64_t c = rest % s.gx_sizes[d];
      rest /= s.gx_sizes[d];
      if (d == s.dim) {
        target = c;
        continue;
      }
      inside = inside && c < s.sizes[d];
      g_base += c * s.g_strides[d];
      i_base += c * s.index_strides[d];
    }
    if (!inside) continue;
    A acc = convert::convert<S, A>(gx[q]);
    for (int64_t j = 0; j < s.sizes[s.dim]; ++j)
      if (index[i_base + j * s.index_strides[s.dim]] == target)
        acc += convert::convert<S, A>(g[g_base + j * s.g_strides[s.dim]]);
    gx[q] = convert::convert<A, S>(acc);
  }
}

}  // namespace

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KernelContext ctx(out);
  Shape x_strides = x.strides();
  x_strides[dim] = 0;  // the index supplies the coordinate along dim
  const auto layout = strided_offsets<3>(out.shape(), {&out.strides(), &index.strides(), &x_strides}, "gather");
  dispatch_any(x.dtype(), "gather", [&]<class S, class A>() {
    launch("gather", gather_elements<S>, blocks_for(n), kBlockThreads, 0, ctx.stream, layout, n, x.device_data<S>(),
           x.stride(dim), x.size(dim), index.device_data<int64_t>(), out.device_data<S>());
  });
}

void scatter_add(const Tensor& g, int64_t dim, const Tensor& index, const Tensor& gx) {
  const int64_t n = gx.numel();
  if (n == 0 || g.numel() == 0) return;
  TS_CHECK(gx.dim() <= kMaxDims, "scatter_add: tensors of more than ", kMaxDims, " dims are not supported on cuda");
  KernelContext ctx(gx);
  ScatterGeometry s{static_cast<int>(gx.dim()), static_cast<int>(dim), {}, {}, {}, {}};
  for (int64_t d = 0; d < gx.dim(); ++d) {
    s.gx_sizes[d] = gx.size(d);
    s.sizes[d] = g.size(d);
    s.g_strides[d] = g.stride(d);
    s.index_strides[d] = index.stride(d);
  }
  dispatch_floating(g.dtype(), "scatter_add", [&]<class S, class A>() {
    launch("scatter_add", scatter_add_elements<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, s, n,
           g.device_data<S>(), index.device_data<int64_t>(), gx.device_data<S>());
  });
}

}  // namespace tessera::cuda
