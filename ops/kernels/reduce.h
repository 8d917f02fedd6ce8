// Kernel interface of the reduction family (internal).
#pragma once
#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

enum class ReduceOp : uint8_t { Sum, Max };

// Reduces x over `dims` (sorted, unique, non-empty) into out, which has x's shape with the
// reduced dims set to 1 (keepdim layout, contiguous).
using ReduceKernel = void(ReduceOp op, const Tensor& x, const Shape& dims, const Tensor& out);
// Index (int64) of the first maximum along `dim`; out has x's shape with dim set to 1.
using ArgmaxKernel = void(const Tensor& x, int64_t dim, const Tensor& out);

// x with `dims` moved last and made contiguous on its device: [outer, inner] rows to reduce.
Tensor with_dims_last(const Tensor& x, const Shape& dims);

}  // namespace tessera
