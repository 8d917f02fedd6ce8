// Reductions over any set of dims (empty dims = all dims), with keepdim.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera {

Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Maximum values; the gradient goes to the maximal elements, split evenly between ties.
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Index of the maximum along one dim (int64, no gradient); first index on ties.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
// Variance with Bessel's `correction` (1 = unbiased, PyTorch's default; 0 = population).
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// Euclidean norm over dims; its gradient at a zero vector is zero (PyTorch's subgradient).
Tensor norm(const Tensor& x, const Shape& dims = {}, bool keepdim = false);

// Sums `x` down to `shape` (the inverse of broadcasting): used by every broadcasting op's backward.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace tessera
