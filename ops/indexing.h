// Joining, splitting, selecting and padding.
#pragma once
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Views of consecutive pieces of size `split_size` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim);
// The slices x.select(dim, i) for every i, as torch.unbind (timm's `q, k, v = qkv.unbind(0)`).
// The views of split, chunk and unbind share one backward, which writes all their gradients into one
// buffer in one pass.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// `chunks` pieces as torch.chunk (ceil(size / chunks) each).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
// Rows of x along dim at the int64 indices (1-D).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// torch.gather: out[i][j] = x[i][index[i][j]] along dim (index int64, same ndim as x).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Constant padding, F.pad order: pads = {last_lo, last_hi, second_last_lo, second_last_hi, ...}.
Tensor pad(const Tensor& x, const Shape& pads, double value = 0.0);
// A tensor of `shape` holding `value`, with src written at the strided region whose element p lies
// at start + p·step per dim (src has shape's rank): the inverse of a strided slice, in one pass.
// The gradients of select, slice and pad are embeds. With `layout` (strides of the same rank), the
// result is dense in the dim order of those strides rather than row-major: a view's gradient laid
// out as the viewed tensor, which its own views then reach without a copy.
Tensor embed(const Tensor& src, const Shape& shape, const Shape& start, const Shape& step, double value = 0.0,
             const Shape& layout = {});

}  // namespace tessera
