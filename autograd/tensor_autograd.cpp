// The autograd members of Tensor (declared in core/tensor.h): requires_grad, grad, grad_fn, and
// backward(), which hands the root and its gradient to the engine.
#include "tessera/autograd/engine.h"
#include "tessera/autograd/node.h"
#include "tessera/ops/kernels/registry.h"

namespace tessera {

using autograd::AutogradMeta;
using autograd::meta_of;

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = meta_of(impl());
  return meta && (meta->requires_grad || meta->grad_fn);
}

Tensor& Tensor::set_requires_grad(bool value) {
  TS_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can be marked; this one was produced by ",
           grad_fn()->name(), " (use detach() first)");
  TS_CHECK(!value || is_floating(dtype()), "set_requires_grad: only floating tensors can require grad, got ",
           dtype_name(dtype()));
  autograd::ensure_meta(impl()).requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = meta_of(impl());
  return !meta || !meta->grad_fn;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* meta = meta_of(impl());
  return meta ? meta->grad : undefined;
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) TS_CHECK(g.shape() == shape(), "set_grad: gradient shape ", g.shape(), " does not match ", shape());
  if (!g.defined() && !meta_of(impl())) return;
  autograd::ensure_meta(impl()).grad = g;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const AutogradMeta* meta = meta_of(impl());
  return meta ? meta->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    TS_CHECK(numel() == 1,
             "backward: grad can be implicitly created only for a tensor with one element, "
             "got shape ",
             shape(), "; pass the upstream gradient");
    g = Tensor::empty(shape(), dtype(), device());
    fill_kernel[device()](g, 1.0);
  }
  TS_CHECK(g.dtype() == dtype() && g.device() == device(), "backward: gradient is ", describe(g), " but the tensor is ",
           describe(*this));
  autograd::backward(*this, g, retain_graph);
}

}  // namespace tessera
