// CUDA kernels of the copy family: strided copy with dtype conversion and fill, over any layout
// (views, broadcasts: the source of a copy may be an expanded view with stride 0). The copy goes
// through map_elements (cuda/map.h): whole 16-byte vectors when both sides are contiguous.
#include "tessera/cuda/device.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/map.h"
#include "tessera/cuda/strided.h"
#include "tessera/cuda/tensor_table.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/copy.h"

namespace tessera::cuda {

namespace {

// A stored value converted (cuda/map.h's formula).
template <class S, class D>
struct Convert {
  __device__ D operator()(S v) const { return convert::convert<S, D>(v); }
};

template <class D>
__global__ void fill_elements(StridedOffsets<1> layout, int64_t n, D value, D* dst) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t off[1];
    layout.offsets(i, off);
    dst[off[0]] = value;
  }
}

// The region of embed: out's sizes and strides, and per dim where the region starts, its step and
// its count, with src's strides.
struct EmbedRegion {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {}, out_strides[kMaxDims] = {}, start[kMaxDims] = {}, step[kMaxDims] = {},
          count[kMaxDims] = {}, src_strides[kMaxDims] = {};
};

template <class S, class D>
__global__ void embed_elements(EmbedRegion r, int64_t n, const S* src, D value, D* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t rest = i, at = 0, to = 0;
    bool inside = true;
    for (int d = r.ndim - 1; d >= 0; --d) {
      const int64_t coord = rest % r.sizes[d], c = coord - r.start[d];
      rest /= r.sizes[d];
      to += coord * r.out_strides[d];
      inside = inside && c >= 0 && c % r.step[d] == 0 && c / r.step[d] < r.count[d];
      if (inside) at += c / r.step[d] * r.src_strides[d];
    }
    out[to] = inside ? convert::convert<S, D>(src[at]) : value;
  }
}

// Element e of the concatenation of a cast_all's tensors: list 0 holds the sources, list 1 the
// destinations.
template <class S, class D>
__global__ void cast_elements(TensorTable table, int64_t total) {
  TS_GRID_STRIDE_LOOP(e, total) {
    const int64_t i = table.tensor_of(e), at = e - table.start[i];
    table.at<D>(1, i)[at] = convert::convert<S, D>(table.at<const S>(0, i)[at]);
  }
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  KernelContext ctx(dst);
  const auto layout = strided_offsets<2>(dst.shape(), {&dst, &src}, "copy");
  convert::visit_dtype(src.dtype(), [&](auto s_tag) {
    convert::visit_dtype(dst.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      map_elements("copy", ctx.stream, layout, n, Convert<S, D>{}, dst.device_data<D>(), src.device_data<S>());
    });
  });
}

void cast_all(const std::vector<Tensor>& srcs, const std::vector<Tensor>& dsts) {
  const DeviceTable table = upload_table({&srcs, &dsts});
  if (table.total == 0) return;
  KernelContext ctx(dsts.front());
  convert::visit_dtype(srcs.front().dtype(), [&](auto s_tag) {
    convert::visit_dtype(dsts.front().dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      launch("cast_all", cast_elements<S, D>, blocks_for(table.total), kBlockThreads, 0, ctx.stream, table.view(),
             table.total);
    });
  });
}

void fill(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  KernelContext ctx(dst);
  const auto layout = strided_offsets<1>(dst.shape(), {&dst}, "fill");
  convert::visit_dtype(dst.dtype(), [&](auto tag) {
    using D = decltype(tag);
    launch("fill", fill_elements<D>, blocks_for(n), kBlockThreads, 0, ctx.stream, layout, n,
           convert::from_double<D>(value), dst.device_data<D>());
  });
}

void embed(const Tensor& src, const Tensor& out, const Shape& start, const Shape& step, double value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TS_CHECK(out.dim() <= kMaxDims, "embed: tensors of more than ", kMaxDims, " dims are not supported on cuda");
  KernelContext ctx(out);
  EmbedRegion r;
  r.ndim = static_cast<int>(out.dim());
  for (int d = 0; d < r.ndim; ++d) {
    r.sizes[d] = out.size(d);
    r.out_strides[d] = out.stride(d);
    r.start[d] = start[d];
    r.step[d] = step[d];
    r.count[d] = src.size(d);
    r.src_strides[d] = src.stride(d);
  }
  convert::visit_dtype(src.dtype(), [&](auto s_tag) {
    convert::visit_dtype(out.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      launch("embed", embed_elements<S, D>, blocks_for(n), kBlockThreads, 0, ctx.stream, r, n, src.device_data<S>(),
             convert::from_double<D>(value), out.device_data<D>());
    });
  });
}

}  // namespace tessera::cuda
