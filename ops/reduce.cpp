// Reductions and their gradients. sum and amax are kernels; mean, var and norm are composed from
// them, so they get every device and their gradients for free (norm adds its own gradient to
// define it at zero).
#include "tessera/ops/reduce.h"

#include <algorithm>

#include "tessera/autograd/function.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

// Sorted unique non-negative dims; empty means all dims.
Shape normalize_dims(const Shape& dims, int64_t ndim, const char* op) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  TS_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": repeated dim in ", dims);
  return out;
}

Shape keepdim_shape(const Shape& shape, const Shape& dims) {
  Shape out = shape;
  for (int64_t d : dims) out[d] = 1;
  return out;
}

Shape dropped_shape(const Shape& shape, const Shape& dims) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(shape[d]);
  return out;
}

int64_t reduced_count(const Shape& shape, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

Tensor reduce_forward(ReduceOp op, const Tensor& x, const Shape& dims, const char* name) {
  TS_CHECK(x.defined(), name, ": input is an undefined tensor");
  Tensor out = Tensor::empty(keepdim_shape(x.shape(), dims), x.dtype(), x.device());
  if (dims.empty() || x.dim() == 0) {  // nothing to reduce: a copy
    out.copy_(x.detach());
    return out;
  }
  if (op == ReduceOp::Max)
    TS_CHECK(reduced_count(x.shape(), dims) > 0, name, ": cannot take the maximum over an empty dim of ", x.shape());
  reduce_kernel[x.device()](op, x, dims, out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims_in, bool keepdim) {
  TraceScope trace;
  Shape dims = normalize_dims(dims_in, x.dim(), op_name(OpId::sum));
  Tensor out = reduce_forward(ReduceOp::Sum, x, dims, op_name(OpId::sum));
  if (!keepdim) out = out.view(dropped_shape(x.shape(), dims));
  if (autograd::needs_grad({x}))
    autograd::record("SumBackward", {x}, out, [in_shape = x.shape(), dims](const Tensor& g, const GradMask&) {
      return std::vector<Tensor>{g.reshape(keepdim_shape(in_shape, dims)).expand(in_shape)};
    });
  if (trace.outermost()) trace.record(OpId::sum, {x}, {out}, {{"dims", dims}, {"keepdim", int64_t{keepdim}}});
  return out;
}

Tensor mean(const Tensor& x, const Shape& dims_in, bool keepdim) {
  Shape dims = normalize_dims(dims_in, x.dim(), op_name(OpId::mean));
  int64_t n = reduced_count(x.shape(), dims);
  TS_CHECK(n > 0, "mean: reducing over an empty dim of ", x.shape());
  return sum(x, dims, keepdim) / static_cast<double>(n);
}

Tensor amax(const Tensor& x, const Shape& dims_in, bool keepdim) {
  constexpr const char* op = op_name(OpId::amax);  // for messages and saved tensors
  Shape dims = normalize_dims(dims_in, x.dim(), op);
  Tensor out = reduce_forward(ReduceOp::Max, x, dims, op);
  Tensor result = keepdim ? out : out.view(dropped_shape(x.shape(), dims));
  if (autograd::needs_grad({x}))
    autograd::record("AmaxBackward", {x}, result,
                     [sx = SavedTensor(x), so = SavedTensor(out), dims](const Tensor& g, const GradMask&) {
                       Tensor xv = sx.unpack(op), m = so.unpack(op);
                       Tensor hit = where(eq(xv, m), ones_like(m), zeros_like(m));  // ties share equally
                       Tensor count = sum(hit, dims, true);
                       return std::vector<Tensor>{g.reshape(m.shape()) * hit / count};
                     });
  return result;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  TS_CHECK(x.defined() && x.dim() > 0, "argmax: expected a tensor with at least one dim");
  int64_t d = wrap_dim(dim, x.dim(), op_name(OpId::argmax));
  TS_CHECK(x.shape()[d] > 0, "argmax: dim ", dim, " of ", x.shape(), " is empty");
  Tensor out = Tensor::empty(keepdim_shape(x.shape(), {d}), DType::Int64, x.device());
  // Half-precision values compare as float32: the conversion is exact, so the answer is the same.
  argmax_kernel[x.device()](is_half(x.dtype()) ? x.detach().to(DType::Float32) : x, d, out);
  return keepdim ? out : out.view(dropped_shape(x.shape(), {d}));
}

Tensor var(const Tensor& x, const Shape& dims_in, int64_t correction, bool keepdim) {
  Shape dims = normalize_dims(dims_in, x.dim(), op_name(OpId::var));
  int64_t n = reduced_count(x.shape(), dims);
  TS_CHECK(n - correction > 0, "var: ", n, " elements are too few for correction ", correction);
  Tensor centered = x - mean(x, dims, true);
  return sum(centered * centered, dims, keepdim) / static_cast<double>(n - correction);
}

Tensor norm(const Tensor& x, const Shape& dims_in, bool keepdim) {
  constexpr const char* op = op_name(OpId::norm);  // for messages and saved tensors
  Shape dims = normalize_dims(dims_in, x.dim(), op);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sqrt(sum(x * x, dims, true));
  }
  Tensor result = keepdim ? out : out.view(dropped_shape(x.shape(), dims));
  if (autograd::needs_grad({x}))
    autograd::record("NormBackward", {x}, result,
                     [sx = SavedTensor(x), so = SavedTensor(out)](const Tensor& g, const GradMask&) {
                       Tensor xv = sx.unpack(op), n = so.unpack(op);
                       Tensor zero = eq(n, scalar_like(0.0, n));
                       Tensor safe = where(zero, ones_like(n), n);
                       Tensor gx = g.reshape(n.shape()) * xv / safe;
                       return std::vector<Tensor>{where(zero, scalar_like(0.0, gx), gx)};
                     });
  return result;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  TS_CHECK(shape.size() <= x.shape().size(), "sum_to: cannot reduce ", x.shape(), " to ", shape);
  const size_t lead = x.shape().size() - shape.size();
  Shape dims;
  for (size_t d = 0; d < x.shape().size(); ++d) {
    if (d < lead) dims.push_back(static_cast<int64_t>(d));
    else if (shape[d - lead] == 1 && x.shape()[d] != 1) dims.push_back(static_cast<int64_t>(d));
    else TS_CHECK(shape[d - lead] == x.shape()[d], "sum_to: cannot reduce ", x.shape(), " to ", shape);
  }
  return dims.empty() ? x.reshape(shape) : sum(x, dims, true).reshape(shape);
}

}  // namespace tessera
