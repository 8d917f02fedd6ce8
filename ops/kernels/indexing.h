// Kernel interface of the indexing family (internal). cat and pad need no kernel of their own
// (they are fills and strided copies into views of the output, see ops/kernels/copy.h); gather
// and index_select share one gather kernel and one scatter-add kernel: index_select passes its
// 1-D index as a stride-0 expanded view of the output's shape, which turns it into a gather.
#pragma once
#include <cstdint>
#include <optional>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// The front end checks every index value with check_range_kernel (ops/kernels/checks.h) before
// calling these; device kernels still skip values outside [0, size) (their error is reported at
// the next synchronisation), so nothing is read or written out of bounds.

// out[p] = x[p with coordinate `dim` replaced by index[p]] for every position p of out.
// index (int64) has out's shape and any strides (stride 0 allowed); x has any strides, the same
// rank, and at least out's size in every dim but `dim`. Any dtype of x (out has the same).
using GatherKernel = void(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);

// The adjoint of GatherKernel: gx[p with `dim` replaced by index[p]] += g[p]. gx is contiguous
// and already holds the values to add to (zeros for a gradient); repeated indices accumulate.
// g and index have the same shape and any strides. float32/float64.
using ScatterAddKernel = void(const Tensor& g, int64_t dim, const Tensor& index, const Tensor& gx);

}  // namespace tessera
