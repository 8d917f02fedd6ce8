// Kernel interface of the copy family (internal): strided copy with dtype conversion, and fill.
// Both work across dtypes (including bfloat16/float16 storage types).
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// dst[i] = convert(src[i]); same shape, any strides and dtypes, same device.
using CopyKernel = void(const Tensor& src, const Tensor& dst);
// dst[i] = value; any strides.
using FillKernel = void(const Tensor& dst, double value);

// Host <-> device transfers are registered by device backends (the CPU has nothing to transfer).
using TransferKernel = void(const Tensor& src, const Tensor& dst);  // contiguous, same dtype
extern KernelTable<TransferKernel> to_device_kernel;                // indexed by the destination device
extern KernelTable<TransferKernel> to_host_kernel;                  // indexed by the source device

}  // namespace tessera
