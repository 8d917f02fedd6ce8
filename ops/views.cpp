// View ops: new shape/strides/offset over the same storage, no copy. Each is differentiable; the
// gradient of a view is the inverse rearrangement of the output gradient.
#include <algorithm>
#include <numeric>

#include "tessera/autograd/function.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

Tensor alias(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(
      std::make_shared<TensorImpl>(base.impl().storage, std::move(sizes), std::move(strides), offset, base.dtype()));
}

// Replaces one -1 by the size that keeps numel; checks the element count.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TS_CHECK(infer < 0, op, ": only one dimension can be inferred, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      TS_CHECK(out[i] >= 0, op, ": invalid size in shape ", shape);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    TS_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of size ", numel);
    out[infer] = numel / known;
  }
  TS_CHECK(numel_of(out) == numel, op, ": shape ", shape, " is invalid for input of size ", numel);
  return out;
}

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), or none.
// Groups the old dims into runs that are contiguous among themselves; each run must be covered
// exactly by a run of new dims.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape) {
  Shape out(new_shape.size());
  if (numel_of(old_shape) == 0 || old_shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_stride = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

void record_reshape(const Tensor& in, Tensor& out, const char* name) {
  if (autograd::needs_grad({in}))
    autograd::record(name, {in}, out, [shape = in.shape()](const Tensor& g, const GradMask&) {
      return std::vector<Tensor>{g.reshape(shape)};
    });
}

}  // namespace

namespace {
// Views report themselves to an op tracer (ops/trace.h) by what they mean: a reshape with its
// target shape (view, reshape, unsqueeze, squeeze), permute, slice, select, expand; a copy as clone.
void trace_view(const TraceScope& trace, OpId op, const Tensor& in, const Tensor& out,
                std::vector<std::pair<const char*, TraceValue>> args) {
  if (trace.outermost()) trace.record(op, {in}, {out}, std::move(args));
}
}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  TraceScope trace;
  Shape target = infer_shape(shape, numel(), "view");
  auto strides_opt = view_strides(this->shape(), strides(), target);
  TS_CHECK(strides_opt.has_value(), "view: shape ", shape, " is not compatible with the strides ", strides(),
           " of a tensor of shape ", this->shape(), "; use reshape() (copies) instead");
  Tensor out = alias(*this, target, *strides_opt, offset());
  record_reshape(*this, out, "ViewBackward");
  trace_view(trace, OpId::reshape, *this, out, {{"shape", target}});
  return out;
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), op_name(OpId::reshape));
  if (view_strides(this->shape(), strides(), target)) return view(target);
  return contiguous().view(target);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  TS_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape target(shape().begin(), shape().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= shape()[d];
  target.push_back(merged);
  target.insert(target.end(), shape().begin() + e + 1, shape().end());
  return reshape(target);
}

Tensor Tensor::permute(const Shape& dims) const {
  TraceScope trace;
  TS_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(), " dims ", dims,
           " for a tensor with ", dim(), " dims");
  Shape sizes(dims.size()), st(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), op_name(OpId::permute));
    TS_CHECK(!seen[d], "permute: dim ", d, " repeated in ", dims);
    seen[d] = true;
    sizes[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  Tensor out = alias(*this, sizes, st, offset());
  if (autograd::needs_grad({*this}))
    autograd::record("PermuteBackward", {*this}, out,
                     [inverse](const Tensor& g, const GradMask&) { return std::vector<Tensor>{g.permute(inverse)}; });
  Shape wrapped(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) wrapped[i] = wrap_dim(dims[i], dim(), op_name(OpId::permute));
  trace_view(trace, OpId::permute, *this, out, {{"dims", wrapped}});
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) return *this;
  Shape dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  TraceScope trace;
  TS_CHECK(dim() > 0, "slice: cannot slice a 0-d tensor");
  d = wrap_dim(d, dim(), op_name(OpId::slice));
  TS_CHECK(step >= 1, "slice: step must be positive, got ", step);
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = shape(), st = strides();
  sizes[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = alias(*this, sizes, st, offset() + start * strides()[d]);
  if (autograd::needs_grad({*this}))
    autograd::record("SliceBackward", {*this}, out,
                     [in_shape = shape(), in_strides = strides(), d, start, step](const Tensor& g, const GradMask&) {
                       // Where the input's gradient already holds another consumer's part, the
                       // slice adds into its region alone (autograd/node.h gradient_sink).
                       if (const Tensor sink = autograd::gradient_sink(0); sink.defined())
                         return std::vector<Tensor>{autograd::add_into_part(
                             sink, sink.slice(d, start, start + (g.size(d) - 1) * step + 1, step), g)};
                       Shape at(in_shape.size(), 0), steps(in_shape.size(), 1);
                       at[static_cast<size_t>(d)] = start;
                       steps[static_cast<size_t>(d)] = step;
                       return std::vector<Tensor>{embed(g, in_shape, at, steps, 0.0, in_strides)};
                     });
  trace_view(trace, OpId::slice, *this, out, {{"dim", d}, {"start", start}, {"end", end}, {"step", step}});
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TS_CHECK(dim() > 0, "narrow: cannot narrow a 0-d tensor");
  int64_t dd = wrap_dim(d, dim(), "narrow");
  int64_t n = shape()[dd];
  if (start < 0) start += n;
  TS_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ", start + length,
           ") out of bounds for dim ", d, " of size ", n, " (shape ", shape(), ")");
  return slice(dd, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TraceScope trace;
  TS_CHECK(dim() > 0, "select: cannot select from a 0-d tensor");
  d = wrap_dim(d, dim(), op_name(OpId::select));
  const int64_t n = shape()[d];
  TS_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d, " of size ", n, " (shape ",
           shape(), ")");
  if (index < 0) index += n;
  Shape sizes = shape(), st = strides();
  sizes.erase(sizes.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = alias(*this, sizes, st, offset() + index * strides()[d]);
  if (autograd::needs_grad({*this}))
    // The gradient is laid out as the input (often a permuted view of a projection: q, k and v of
    // qkv), so the input's own view backward reaches the projection's layout without a copy.
    autograd::record(
        "SelectBackward", {*this}, out,
        [in_shape = shape(), in_strides = strides(), d, index](const Tensor& g, const GradMask&) {
          if (const Tensor sink = autograd::gradient_sink(0); sink.defined())  // as slice's
            return std::vector<Tensor>{autograd::add_into_part(sink, sink.select(d, index), g)};
          Shape at(in_shape.size(), 0);
          at[static_cast<size_t>(d)] = index;
          return std::vector<Tensor>{embed(g.unsqueeze(d), in_shape, at, Shape(in_shape.size(), 1), 0.0, in_strides)};
        });
  trace_view(trace, OpId::select, *this, out, {{"dim", d}, {"index", index}});
  return out;
}

Tensor Tensor::expand(const Shape& target) const {
  TraceScope trace;
  TS_CHECK(target.size() >= shape().size(), "expand: cannot expand shape ", shape(), " to fewer dims ", target);
  const size_t lead = target.size() - shape().size();
  Shape sizes(target.size()), st(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      TS_CHECK(target[i] >= 0, "expand: size -1 is not allowed for a new leading dim in ", target);
      sizes[i] = target[i];
      st[i] = 0;
      continue;
    }
    int64_t have = shape()[i - lead];
    int64_t want = target[i] == -1 ? have : target[i];
    TS_CHECK(have == want || have == 1, "expand: the expanded size ", want, " must match the existing size ", have,
             " at dim ", i, " (shape ", shape(), " to ", target, ")");
    sizes[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  if (sizes == shape()) return *this;
  Tensor out = alias(*this, sizes, st, offset());
  if (autograd::needs_grad({*this}))
    autograd::record("ExpandBackward", {*this}, out, [in_shape = shape()](const Tensor& g, const GradMask&) {
      return std::vector<Tensor>{sum_to(g, in_shape)};
    });
  trace_view(trace, OpId::expand, *this, out, {{"shape", sizes}});
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  TraceScope trace;
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sizes = shape(), st = strides();
  int64_t s = d < dim() ? strides()[d] * shape()[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  st.insert(st.begin() + d, s);
  Tensor out = alias(*this, sizes, st, offset());
  record_reshape(*this, out, "UnsqueezeBackward");
  trace_view(trace, OpId::reshape, *this, out, {{"shape", out.shape()}});
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  TraceScope trace;
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape sizes = shape(), st = strides();
  sizes.erase(sizes.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = alias(*this, sizes, st, offset());
  record_reshape(*this, out, "SqueezeBackward");
  trace_view(trace, OpId::reshape, *this, out, {{"shape", out.shape()}});
  return out;
}

Tensor Tensor::squeeze() const {
  Shape sizes;
  for (int64_t s : shape())
    if (s != 1) sizes.push_back(s);
  return sizes.size() == shape().size() ? *this : reshape(sizes);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  TraceScope trace;
  Tensor out = Tensor::empty(shape(), dtype(), device());
  copy_kernel[device()](*this, out);
  if (autograd::needs_grad({*this}))
    autograd::record("CloneBackward", {*this}, out,
                     [](const Tensor& g, const GradMask&) { return std::vector<Tensor>{g}; });
  trace_view(trace, OpId::clone, *this, out, {});
  return out;
}

Tensor Tensor::to(DType target) const {
  TraceScope trace;
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), target, device());
  copy_kernel[device()](*this, out);
  if (autograd::needs_grad({*this}) && is_floating(target))
    autograd::record("ToDTypeBackward", {*this}, out, [source = dtype()](const Tensor& g, const GradMask&) {
      return std::vector<Tensor>{g.to(source)};
    });
  trace_view(trace, OpId::to, *this, out, {{"dtype", std::string(dtype_name(target))}});
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor src = contiguous();
  Tensor out = Tensor::empty(shape(), dtype(), target);
  if (target.is_cpu()) to_host_kernel[device()](src, out);
  else to_device_kernel[target](src, out);
  if (autograd::needs_grad({*this}))
    autograd::record("ToDeviceBackward", {*this}, out, [source = device()](const Tensor& g, const GradMask&) {
      return std::vector<Tensor>{g.to(source)};
    });
  return out;
}

}  // namespace tessera
