// CUDA kernels of the copy family: strided copy with dtype conversion and fill, over any layout
// (views, broadcasts: the source of a copy may be an expanded view with stride 0). The copy goes
// through map_elements (cuda/map.h): whole 16-byte vectors when both sides are contiguous.
#include "tessera/cuda/device.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/map.h"
#include "tessera/cuda/strided.h"
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

}  // namespace tessera::cuda
