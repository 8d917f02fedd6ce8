// softmax / log_softmax: argument checks, dispatch, and the gradient. Both save only their output:
// the backward formulas (see ops/kernels/softmax.h) need y, not x.
#include "tessera/ops/softmax.h"

#include "tessera/autograd/function.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

Tensor softmax_impl(SoftmaxKind kind, const Tensor& x, int64_t dim_in) {
  TraceScope trace;
  const OpId op = kind == SoftmaxKind::Softmax ? OpId::softmax : OpId::log_softmax;
  const char* name = op_name(op);
  TS_CHECK(x.defined(), name, ": input is an undefined tensor");
  TS_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", describe(x));
  const int64_t dim = wrap_dim(dim_in, x.dim(), name);
  // A 0-d tensor is a one-element row.
  Tensor xc = x.dim() == 0 ? x.detach().reshape({1}) : x.detach().contiguous();
  Tensor y = Tensor::empty(xc.shape(), x.dtype(), x.device());
  if (y.numel() > 0) softmax_kernel[x.device()](kind, xc, dim, y);
  y = y.view(x.shape());
  if (autograd::needs_grad({x}))
    autograd::record(kind == SoftmaxKind::Softmax ? "SoftmaxBackward" : "LogSoftmaxBackward", {x}, y,
                     [kind, dim, name, sy = SavedTensor(y)](const Tensor& g, const GradMask&) {
                       Tensor yv = sy.unpack(name);
                       Shape flat = yv.dim() == 0 ? Shape{1} : yv.shape();
                       Tensor gx = Tensor::empty(flat, yv.dtype(), yv.device());
                       if (gx.numel() > 0)
                         softmax_backward_kernel[yv.device()](kind, yv.reshape(flat), g.contiguous().reshape(flat), dim,
                                                              gx);
                       return std::vector<Tensor>{gx.view(yv.shape())};
                     });
  if (trace.outermost()) trace.record(op, {x}, {y}, {{"dim", dim}});
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(SoftmaxKind::Softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(SoftmaxKind::LogSoftmax, x, dim); }

}  // namespace tessera
