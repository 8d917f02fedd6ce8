// Joining, splitting, selecting and padding: argument checks, dispatch, gradients.
//
// cat allocates its output once and joins its inputs into it in one pass (the cat kernel); its
// gradient is the matching narrow() slices of g. split, chunk and unbind are views (narrow, select)
// with one backward node for all of them, which joins the pieces' gradients into one buffer laid
// out as the input with the same cat kernel: no zero-filled full-size gradient per piece, and no
// sums of them (TESSERA_SPLIT_BACKWARD=0, core/levers.h: a node per view, as narrow and select
// record alone). index_select is a gather whose 1-D index is expanded over the
// output's shape (stride 0 off `dim`); gather's gradient is the adjoint scatter-add, which sums
// the contributions of repeated indices. pad fills the output and copies the overlap of input and
// output (negative pads crop); its gradient is that overlap of g.
#include "tessera/ops/indexing.h"

#include <algorithm>

#include "tessera/autograd/function.h"
#include "tessera/core/levers.h"
#include "tessera/ops/autocast_operands.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

void check_defined(const Tensor& t, const char* op, const char* what) {
  TS_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

void check_list(const std::vector<Tensor>& tensors, const char* op) {
  TS_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) TS_CHECK(tensors[i].defined(), op, ": tensor ", i, " is undefined");
}

// Checks an index tensor's dtype and device and that all its values lie in [0, size of x's dim d)
// (on a device: at the next synchronisation, see ops/kernels/checks.h).
void check_index(const Tensor& x, int64_t d, const Tensor& index, const char* op) {
  check_defined(index, op, "index");
  TS_CHECK(index.dtype() == DType::Int64, op, ": expected an int64 index, got ", describe(index));
  TS_CHECK(index.device() == x.device(), op, ": index on ", index.device().str(), " but input on ", x.device().str());
  const int64_t size = x.shape()[d];
  check_range_kernel[index.device()](
      index, size,
      {detail::concat(op, ": index"),
       detail::concat("is out of range for dim ", d, " of size ", size, " (input shape ", x.shape(), ")")});
}

// out[p] = x[p with dim d := index[p]], out of index's shape; backward scatter-adds g into zeros.
Tensor gather_along(const Tensor& x, int64_t d, const Tensor& index, const char* op, const char* backward_name) {
  Tensor out = Tensor::empty(index.shape(), x.dtype(), x.device());
  gather_kernel[x.device()](x, d, index, out);
  if (autograd::needs_grad({x}))
    autograd::record(backward_name, {x}, out,
                     [si = SavedTensor(index), in_shape = x.shape(), d, op](const Tensor& g, const GradMask&) {
                       Tensor gx = zeros(in_shape, g.dtype(), g.device());
                       scatter_add_kernel[g.device()](g, d, si.unpack(op), gx);
                       return std::vector<Tensor>{gx};
                     });
  return out;
}

// x narrowed to [start[d], start[d] + length[d]) in every dim.
Tensor region(const Tensor& x, const Shape& start, const Shape& length) {
  Tensor r = x;
  for (int64_t d = 0; d < x.dim(); ++d) r = r.narrow(d, start[d], length[d]);
  return r;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors_in, int64_t dim) {
  TraceScope trace;
  check_list(tensors_in, op_name(OpId::cat));
  const std::vector<Tensor> tensors = autocast_meet(tensors_in);
  const Tensor& first = tensors[0];
  TS_CHECK(first.dim() > 0, "cat: zero-dimensional tensors cannot be concatenated");
  const int64_t d = wrap_dim(dim, first.dim(), op_name(OpId::cat));
  Shape out_shape = first.shape(), sizes;
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.dtype() == first.dtype() && t.device() == first.device(), "cat: tensor ", i, " is ", describe(t),
             " but tensor 0 is ", describe(first), " (dtypes and devices must match)");
    bool match = t.dim() == first.dim();
    for (int64_t k = 0; match && k < t.dim(); ++k) match = k == d || t.shape()[k] == first.shape()[k];
    TS_CHECK(match, "cat: sizes must match except in dim ", d, ", but tensor 0 has shape ", first.shape(),
             " and tensor ", i, " has shape ", t.shape());
    sizes.push_back(t.shape()[d]);
    out_shape[d] += t.shape()[d];
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  cat_kernel[out.device()](tensors, sizes, d, out);
  if (autograd::needs_grad(tensors))
    autograd::record("CatBackward", tensors, out, [d, sizes](const Tensor& g, const GradMask& needs) {
      std::vector<Tensor> grads;
      int64_t offset = 0;
      for (size_t i = 0; i < sizes.size(); offset += sizes[i], ++i)
        grads.push_back(needs[i] ? g.narrow(d, offset, sizes[i]) : Tensor());
      return grads;
    });
  if (trace.outermost()) trace.record(OpId::cat, tensors, {out}, {{"dim", d}});
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list(tensors, op_name(OpId::stack));
  for (size_t i = 1; i < tensors.size(); ++i)
    TS_CHECK(tensors[i].shape() == tensors[0].shape(),
             "stack: expected tensors of the same shape, but tensor 0 has shape ", tensors[0].shape(), " and tensor ",
             i, " has shape ", tensors[i].shape());
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, op_name(OpId::stack));
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(d));
  return cat(expanded, d);
}

namespace {

// The pieces of x (views, made by `view(i)`) as the outputs of one autograd node, whose backward
// joins their gradients along dim d into a buffer laid out as x, zeros where a piece has none.
// `unsqueeze`: the pieces lost dim d (unbind), so each gradient gets it back first.
template <class View>
std::vector<Tensor> split_views(const Tensor& x, const Shape& sizes, int64_t d, bool unsqueeze, const char* name,
                                const View& view) {
  std::vector<Tensor> pieces;
  if (!autograd::needs_grad({x}) || !levers().split_backward) {
    for (size_t i = 0; i < sizes.size(); ++i) pieces.push_back(view(i));
    return pieces;
  }
  {
    NoGradGuard no_grad;  // the views record no node of their own (a tracer still sees them)
    for (size_t i = 0; i < sizes.size(); ++i) pieces.push_back(view(i));
  }
  for (Tensor& p : pieces) p = p.detach();
  autograd::record(name, {x}, pieces,
                   [in_shape = x.shape(), in_strides = x.strides(), sizes, d, unsqueeze](
                       const std::vector<Tensor>& grads, const GradMask&) {
                     const Tensor* some = nullptr;
                     int defined = 0;
                     for (const Tensor& g : grads)
                       if (g.defined()) {
                         some = &g;
                         ++defined;
                       }
                     // Given the input's gradient so far (autograd/node.h gradient_sink), the pieces
                     // that came are added into their parts of it; worth it up to two pieces, which
                     // are as many launches as the joined gradient and its sum (CoaT's CRPE takes
                     // only v of qkv).
                     if (const Tensor sink = autograd::gradient_sink(0); sink.defined() && defined <= 2) {
                       for (int64_t i = 0, offset = 0; i < static_cast<int64_t>(grads.size()); offset += sizes[i++])
                         if (grads[i].defined())
                           autograd::add_into_part(sink, sink.narrow(d, offset, sizes[i]),
                                                   unsqueeze ? grads[i].unsqueeze(d) : grads[i]);
                       return std::vector<Tensor>{sink};
                     }
                     Tensor gx = Tensor::empty_in_order(in_shape, in_strides, some->dtype(), some->device());
                     std::vector<Tensor> joined;
                     for (const Tensor& g : grads) joined.push_back(g.defined() && unsqueeze ? g.unsqueeze(d) : g);
                     cat_kernel[gx.device()](joined, sizes, d, gx);
                     return std::vector<Tensor>{gx};
                   });
  return pieces;
}

}  // namespace

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  check_defined(x, op_name(OpId::unbind), "input");
  TS_CHECK(x.dim() > 0, "unbind: cannot unbind a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), op_name(OpId::unbind));
  return split_views(x, Shape(static_cast<size_t>(x.shape()[d]), 1), d, true, "UnbindBackward",
                     [&](size_t i) { return x.select(d, static_cast<int64_t>(i)); });
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) {
  check_defined(x, op_name(OpId::split_with_sizes), "input");
  TS_CHECK(x.dim() > 0, "split_with_sizes: cannot split a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), op_name(OpId::split_with_sizes));
  int64_t total = 0;
  for (int64_t s : sizes) {
    TS_CHECK(s >= 0, "split_with_sizes: sizes ", sizes, " contain a negative size");
    total += s;
  }
  TS_CHECK(total == x.shape()[d], "split_with_sizes: sizes ", sizes, " sum to ", total, " but dim ", d, " has size ",
           x.shape()[d], " (shape ", x.shape(), ")");
  Shape offsets;
  for (int64_t offset = 0; int64_t s : sizes) {
    offsets.push_back(offset);
    offset += s;
  }
  return split_views(x, sizes, d, false, "SplitBackward", [&](size_t i) { return x.narrow(d, offsets[i], sizes[i]); });
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined(x, op_name(OpId::split), "input");
  TS_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), op_name(OpId::split));
  const int64_t n = x.shape()[d];
  TS_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ", split_size,
           " for dim ", d, " of size ", n);
  Shape sizes;
  for (int64_t offset = 0; offset < n; offset += split_size) sizes.push_back(std::min(split_size, n - offset));
  if (sizes.empty()) sizes.push_back(0);  // an empty dim splits into one empty piece (torch.split)
  return split_with_sizes(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined(x, op_name(OpId::chunk), "input");
  TS_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  TS_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), op_name(OpId::chunk));
  const int64_t n = x.shape()[d];
  // torch.chunk: pieces of ceil(n / chunks), so there may be fewer than `chunks`; an empty dim
  // gives `chunks` empty pieces.
  if (n == 0) return split_with_sizes(x, Shape(chunks, 0), d);
  return split(x, (n + chunks - 1) / chunks, d);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  constexpr const char* op = op_name(OpId::index_select);  // for messages and saved tensors
  check_defined(x, op, "input");
  TS_CHECK(x.dim() > 0, "index_select: expected an input with at least one dim, got ", describe(x));
  const int64_t d = wrap_dim(dim, x.dim(), op);
  check_index(x, d, index, op);
  TS_CHECK(index.dim() <= 1, "index_select: expected a 1-D index, got shape ", index.shape());
  const int64_t n = index.numel();
  Shape out_shape = x.shape(), line(x.dim(), 1);
  out_shape[d] = n;
  line[d] = n;
  return gather_along(x, d, index.detach().reshape(line).expand(out_shape), op, "IndexSelectBackward");
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  constexpr const char* op = op_name(OpId::gather);  // for messages and saved tensors
  check_defined(x, op, "input");
  check_defined(index, op, "index");
  TS_CHECK(x.dim() > 0, "gather: expected an input with at least one dim, got ", describe(x));
  const int64_t d = wrap_dim(dim, x.dim(), op);
  TS_CHECK(index.dim() == x.dim(), "gather: index shape ", index.shape(), " must have as many dims as input shape ",
           x.shape());
  for (int64_t k = 0; k < x.dim(); ++k)
    TS_CHECK(k == d || index.shape()[k] <= x.shape()[k], "gather: index shape ", index.shape(), " exceeds input shape ",
             x.shape(), " in dim ", k, " (only dim ", d, " may be larger)");
  check_index(x, d, index, op);
  return gather_along(x, d, index.detach(), op, "GatherBackward");
}

Tensor pad(const Tensor& x, const Shape& pads, double value) {
  TraceScope trace;
  check_defined(x, op_name(OpId::pad), "input");
  const int64_t padded_dims = static_cast<int64_t>(pads.size()) / 2;
  TS_CHECK(pads.size() % 2 == 0, "pad: expected an even number of pad values, got ", pads);
  TS_CHECK(padded_dims <= x.dim(), "pad: ", pads, " pads ", padded_dims, " dims but the input ", x.shape(), " has ",
           x.dim());
  // Input element i along dim d lands at output i + lo; the overlap starts at in_start in the
  // input and out_start in the output, and is `length` long (empty when cropped away entirely).
  Shape out_shape = x.shape(), in_start(x.dim(), 0), out_start(x.dim(), 0), length = x.shape();
  for (int64_t k = 0; k < padded_dims; ++k) {
    const int64_t d = x.dim() - 1 - k, lo = pads[2 * k], hi = pads[2 * k + 1], n = x.shape()[d];
    out_shape[d] = n + lo + hi;
    TS_CHECK(out_shape[d] >= 0, "pad: padding ", pads, " gives dim ", d, " of input shape ", x.shape(),
             " the negative size ", out_shape[d]);
    length[d] = std::max<int64_t>(0, n - std::max<int64_t>(0, -lo) - std::max<int64_t>(0, -hi));
    if (length[d] > 0) {
      in_start[d] = std::max<int64_t>(0, -lo);
      out_start[d] = std::max<int64_t>(0, lo);
    }
  }
  const Shape unit(static_cast<size_t>(x.dim()), 1);
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  if (out.numel() > 0) embed_kernel[out.device()](region(x.detach(), in_start, length), out, out_start, unit, value);
  if (autograd::needs_grad({x}))
    autograd::record("PadBackward", {x}, out,
                     [in_shape = x.shape(), in_start, out_start, length, unit](const Tensor& g, const GradMask&) {
                       Tensor overlap = region(g, out_start, length);
                       if (overlap.shape() == in_shape) return std::vector<Tensor>{overlap};
                       return std::vector<Tensor>{embed(overlap, in_shape, in_start, unit)};  // cropped: 0
                     });
  if (trace.outermost()) trace.record(OpId::pad, {x}, {out}, {{"pads", pads}, {"value", value}});
  return out;
}

Tensor embed(const Tensor& src, const Shape& shape, const Shape& start, const Shape& step, double value,
             const Shape& layout) {
  check_defined(src, op_name(OpId::embed), "src");
  const size_t rank = shape.size();
  TS_CHECK(static_cast<size_t>(src.dim()) == rank && start.size() == rank && step.size() == rank &&
               (layout.empty() || layout.size() == rank),
           "embed: src ", src.shape(), ", start ", start, ", step ", step, " and layout ", layout,
           " must each have the rank of the shape ", shape);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = src.shape()[d];
    TS_CHECK(step[d] >= 1 && start[d] >= 0 && (n == 0 || start[d] + (n - 1) * step[d] < shape[d]), "embed: src ",
             src.shape(), " at start ", start, " with step ", step, " does not fit in ", shape, " (dim ", d, ")");
  }
  Tensor out = layout.empty() ? Tensor::empty(shape, src.dtype(), src.device())
                              : Tensor::empty_in_order(shape, layout, src.dtype(), src.device());
  if (out.numel() > 0) embed_kernel[src.device()](src.detach(), out, start, step, value);
  if (autograd::needs_grad({src}))
    autograd::record("EmbedBackward", {src}, out,
                     [start, step, counts = src.shape()](const Tensor& g, const GradMask&) {
                       Tensor r = g;  // the region, a strided view of g
                       for (int64_t d = 0; d < g.dim(); ++d) {
                         const size_t k = static_cast<size_t>(d);
                         const int64_t end = counts[k] == 0 ? start[k] : start[k] + (counts[k] - 1) * step[k] + 1;
                         r = r.slice(d, start[k], end, step[k]);
                       }
                       return std::vector<Tensor>{r};
                     });
  return out;
}

}  // namespace tessera
