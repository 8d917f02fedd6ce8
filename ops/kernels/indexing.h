// Kernel interface of the indexing family (internal). cat and pad need no kernel of their own
// (they are fills and strided copies into views of the output, see ops/kernels/copy.h); gather
// and index_select share one gather kernel and one scatter-add kernel: index_select passes its
// 1-D index as a stride-0 expanded view of the output's shape, which turns it into a gather.
#pragma once
#include <cstdint>
#include <optional>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace tessera {

// Returns the first value of the int64 tensor `index` (any strides) outside [0, size), or nullopt
// when all are in range. The front end turns it into an error naming the value; kernels below may
// assume every index is valid.
using IndexBoundsKernel = std::optional<int64_t>(const Tensor& index, int64_t size);

// out[p] = x[p with coordinate `dim` replaced by index[p]] for every position p of out.
// index (int64) has out's shape and any strides (stride 0 allowed); x has any strides, the same
// rank, and at least out's size in every dim but `dim`. Any dtype of x (out has the same).
using GatherKernel = void(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);

// The adjoint of GatherKernel: gx[p with `dim` replaced by index[p]] += g[p]. gx is contiguous
// and already holds the values to add to (zeros for a gradient); repeated indices accumulate.
// g and index have the same shape and any strides. float32/float64.
using ScatterAddKernel = void(const Tensor& g, int64_t dim, const Tensor& index, const Tensor& gx);

extern KernelTable<IndexBoundsKernel> index_bounds_kernel;
extern KernelTable<GatherKernel> gather_kernel;
extern KernelTable<ScatterAddKernel> scatter_add_kernel;

}  // namespace tessera
