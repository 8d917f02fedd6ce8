// CUDA kernels of the copy family: strided copy with dtype conversion and fill, over any layout
// (views, broadcasts: the source of a copy may be an expanded view with stride 0). The copy goes
// through map_elements (cuda/map.h): whole 16-byte vectors when both sides are contiguous.
#include <algorithm>
#include <array>

#include "tessera/core/levers.h"
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

// The dims of out (at most kMaxDims) in its memory order, largest stride first, so that
// neighbouring threads write neighbouring addresses also where out is a permuted layout (the
// gradient of q, k and v of a permuted qkv projection is laid out as the projection); in order
// with TESSERA_MEMORY_ORDER_WALKS=0.
std::array<int, kMaxDims> memory_order(const Tensor& out) {
  std::array<int, kMaxDims> order{};
  const int dims = static_cast<int>(out.dim());
  for (int d = 0; d < dims; ++d) order[d] = d;
  if (levers().memory_order_walks)
    std::stable_sort(order.begin(), order.begin() + dims, [&](int a, int b) { return out.stride(a) > out.stride(b); });
  return order;
}

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

// Up to kCatPieces pieces of a cat, passed by value (no table to upload: a copy would be one more
// node of a graph): out's sizes and strides in its memory order, which of those dims is the joined
// one, where each piece ends along it, and each piece's data (null: zeros) and strides.
constexpr int kCatPieces = 8;
struct CatPieces {
  int ndim = 0, dim = 0, count = 0;
  int64_t sizes[kMaxDims] = {}, out_strides[kMaxDims] = {};
  int64_t end[kCatPieces] = {};
  const void* data[kCatPieces] = {};
  int64_t strides[kCatPieces][kMaxDims] = {};
};

template <class T>
__global__ void cat_elements(CatPieces p, int64_t n, T zero, T* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t coords[kMaxDims];
    int64_t rest = i, to = 0;
    for (int d = p.ndim - 1; d >= 0; --d) {
      coords[d] = rest % p.sizes[d];
      rest /= p.sizes[d];
      to += coords[d] * p.out_strides[d];
    }
    int piece = 0;
    while (coords[p.dim] >= p.end[piece]) ++piece;
    coords[p.dim] -= piece > 0 ? p.end[piece - 1] : 0;
    T value = zero;
    if (const T* src = static_cast<const T*>(p.data[piece])) {
      int64_t at = 0;
      for (int d = 0; d < p.ndim; ++d) at += coords[d] * p.strides[piece][d];
      value = src[at];
    }
    out[to] = value;
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

void cat(const std::vector<Tensor>& pieces, const Shape& sizes, int64_t dim, const Tensor& out) {
  if (out.numel() == 0) return;
  TS_CHECK(out.dim() <= kMaxDims, "cat: tensors of more than ", kMaxDims, " dims are not supported on cuda");
  KernelContext ctx(out);
  const std::array<int, kMaxDims> order = memory_order(out);
  // kCatPieces pieces per launch, each launch over its pieces' part of out.
  for (size_t first = 0, offset = 0; first < pieces.size(); first += kCatPieces) {
    const size_t last = std::min(pieces.size(), first + kCatPieces);
    CatPieces p;
    p.ndim = static_cast<int>(out.dim());
    p.count = static_cast<int>(last - first);
    int64_t extent = 0;
    for (size_t i = first; i < last; ++i) {
      extent += sizes[i];
      p.end[i - first] = extent;
      p.data[i - first] = pieces[i].defined() ? pieces[i].device_raw_data() : nullptr;
    }
    const Tensor part = out.narrow(dim, static_cast<int64_t>(offset), extent);
    offset += static_cast<size_t>(extent);
    for (int k = 0; k < p.ndim; ++k) {
      const int d = order[k];
      if (d == dim) p.dim = k;
      p.sizes[k] = part.size(d);
      p.out_strides[k] = part.stride(d);
      for (size_t i = first; i < last; ++i)
        if (pieces[i].defined()) p.strides[i - first][k] = pieces[i].stride(d);
    }
    const int64_t n = part.numel();
    if (n == 0) continue;
    convert::visit_dtype(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      launch("cat", cat_elements<T>, blocks_for(n), kBlockThreads, 0, ctx.stream, p, n, convert::from_double<T>(0.0),
             part.device_data<T>());
    });
  }
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
  const std::array<int, kMaxDims> order = memory_order(out);
  EmbedRegion r;
  r.ndim = static_cast<int>(out.dim());
  for (int k = 0; k < r.ndim; ++k) {
    const int d = order[k];
    r.sizes[k] = out.size(d);
    r.out_strides[k] = out.stride(d);
    r.start[k] = start[d];
    r.step[k] = step[d];
    r.count[k] = src.size(d);
    r.src_strides[k] = src.stride(d);
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
