// Kernel interface of the copy family (internal): strided copy with dtype conversion, and fill.
// Both work across dtypes (including bfloat16/float16 storage types).
#pragma once
#include <vector>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// dst[i] = convert(src[i]); same shape, any strides and dtypes, same device.
using CopyKernel = void(const Tensor& src, const Tensor& dst);
// dst[i] = value; any strides.
using FillKernel = void(const Tensor& dst, double value);
// out = value, except the strided region of src's shape whose element p lies at out[start + p·step]
// (per dim), which gets convert(src[p]). src and out any strides (out dense, not overlapping), same
// rank; the region lies inside out (the front end checks). One pass over out: the gradient of a select or a
// slice, and a pad, in one launch instead of a fill and a copy.
using EmbedKernel = void(const Tensor& src, const Tensor& out, const Shape& start, const Shape& step, double value);

// out = the pieces joined along `dim`: piece i fills sizes[i] consecutive positions of that dim (in
// order), with zeros where the piece is undefined (a gradient no consumer sent). Defined pieces have
// out's shape but for `dim`, out's dtype, and any strides; out is dense (not overlapping), of any
// layout. One pass over out, in its memory order (one launch on a device for up to 8 pieces): cat
// and stack, and the gradient of a split into views (split, chunk, unbind: q, k and v of qkv).
using CatKernel = void(const std::vector<Tensor>& pieces, const Shape& sizes, int64_t dim, const Tensor& out);
// dsts[i] = convert(srcs[i]) for every pair, in one pass (one launch on a device): equal shapes, all
// contiguous, the sources of one dtype, the destinations of one dtype, one device. A model's weights
// cast to the autocast dtype together (ops/cast_all.h).
using CastAllKernel = void(const std::vector<Tensor>& srcs, const std::vector<Tensor>& dsts);

// Host <-> device transfers are registered by device backends (the CPU has nothing to transfer).
using TransferKernel = void(const Tensor& src, const Tensor& dst);  // contiguous, same dtype
extern KernelTable<TransferKernel> to_device_kernel;                // indexed by the destination device
extern KernelTable<TransferKernel> to_host_kernel;                  // indexed by the source device

}  // namespace tessera
