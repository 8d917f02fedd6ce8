#include "core/tensor.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/kernels/copy.h"
#include "ops/ops.h"

namespace tessera {

TensorImpl::TensorImpl(std::shared_ptr<Storage> s, Shape sz, Shape st, int64_t off, DType dt)
    : storage(std::move(s)), sizes(std::move(sz)), strides(std::move(st)), offset(off), dtype(dt) {}

TensorImpl::~TensorImpl() = default;

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape)
    TS_CHECK(s >= 0, "empty: negative dimension in shape ", shape);
  size_t nbytes = static_cast<size_t>(numel_of(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(nbytes, device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to misplace (PyTorch agrees)
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + offset() * static_cast<int64_t>(element_size());
}

double Tensor::item() const {
  TS_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape());
  Tensor host = to(Device::cpu()).to(DType::Float64).contiguous();
  return *host.data<double>();
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu()).to(DTypeOf<T>::value).contiguous();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

Tensor Tensor::sum() const { return tessera::sum(*this); }
Tensor Tensor::mean() const { return tessera::mean(*this); }

// ---- in-place ------------------------------------------------------------------------------------

static void check_inplace(const Tensor& t, const char* op) {
  TS_CHECK(!(autograd::grad_enabled() && t.requires_grad()), op,
           ": in-place operation on a tensor that requires grad (", describe(t),
           "); wrap it in NoGradGuard (e.g. an optimizer step) or use the out-of-place op");
}

Tensor& Tensor::fill_(double value) {
  check_inplace(*this, "fill_");
  fill_kernel[device()](*this, value);
  impl().storage->bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  TS_CHECK(src.device() == device(), "copy_: source on ", src.device().str(), " but destination on ",
           device().str(), " (use .to(device) first)");
  broadcast_shapes(src.shape(), shape(), "copy_");
  Tensor expanded = src.detach().expand(shape());
  TS_CHECK(expanded.shape() == shape(), "copy_: cannot broadcast source ", src.shape(), " to ", shape());
  copy_kernel[device()](expanded, *this);
  impl().storage->bump_version();
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace(*this, "add_");
  NoGradGuard no_grad;
  Tensor scaled = alpha == 1.0 ? other : other * alpha;
  return copy_(add(*this, scaled));
}

Tensor& Tensor::mul_(double value) {
  check_inplace(*this, "mul_");
  NoGradGuard no_grad;
  return copy_(*this * value);
}

// ---- autograd accessors --------------------------------------------------------------------------

bool Tensor::requires_grad() const {
  const auto& meta = impl().autograd;
  return meta && (meta->requires_grad || meta->grad_fn);
}

Tensor& Tensor::set_requires_grad(bool value) {
  TS_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can be marked; this one was produced by ",
           grad_fn()->name(), " (use detach() first)");
  TS_CHECK(!value || is_floating(dtype()), "set_requires_grad: only floating tensors can require grad, got ",
           dtype_name(dtype()));
  if (!impl().autograd) impl().autograd = std::make_unique<autograd::AutogradMeta>();
  impl().autograd->requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const { return !impl().autograd || !impl().autograd->grad_fn; }

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  return impl().autograd ? impl().autograd->grad : undefined;
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    TS_CHECK(g.shape() == shape(), "set_grad: gradient shape ", g.shape(), " does not match ", shape());
  if (!impl().autograd) impl().autograd = std::make_unique<autograd::AutogradMeta>();
  impl().autograd->grad = g;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  return impl().autograd ? impl().autograd->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    TS_CHECK(numel() == 1, "backward: grad can be implicitly created only for a tensor with one element, "
             "got shape ", shape(), "; pass the upstream gradient");
    g = ones(shape(), dtype(), device());
  }
  TS_CHECK(g.dtype() == dtype() && g.device() == device(), "backward: gradient is ", describe(g),
           " but the tensor is ", describe(*this));
  autograd::backward(*this, g, retain_graph);
}

Tensor Tensor::detach() const {
  return Tensor(std::make_shared<TensorImpl>(impl().storage, shape(), strides(), offset(), dtype()));
}

// ---- printing ------------------------------------------------------------------------------------

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  return detail::concat(dtype_name(t.dtype()), t.shape(), " on ", t.device().str());
}

namespace {
void print_dim(std::ostream& os, const std::vector<double>& v, const Shape& shape, size_t d,
               int64_t base, bool integral, int indent) {
  const int64_t n = shape[d];
  const int64_t edge = 3;  // elements shown at each end of a long dim
  int64_t block = 1;
  for (size_t k = d + 1; k < shape.size(); ++k) block *= shape[k];
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * edge && i == edge) {
      os << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - edge;
    }
    if (d + 1 == shape.size()) {
      double x = v[base + i];
      if (integral) os << static_cast<int64_t>(x);
      else os << std::fixed << std::setprecision(4) << x;
    } else {
      print_dim(os, v, shape, d + 1, base + i * block, integral, indent + 1);
    }
    if (i + 1 < n) os << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> v = t.to_vector<double>();
  std::ostringstream body;
  bool integral = !is_floating(t.dtype());
  if (t.dim() == 0) body << (integral ? std::to_string(static_cast<int64_t>(v[0])) : std::to_string(v[0]));
  else print_dim(body, v, t.shape(), 0, 0, integral, 7);
  os << "tensor(" << body.str();
  if (t.dtype() != DType::Float32) os << ", dtype=" << dtype_name(t.dtype());
  if (!t.device().is_cpu()) os << ", device=" << t.device().str();
  if (t.grad_fn()) os << ", grad_fn=" << t.grad_fn()->name();
  else if (t.requires_grad()) os << ", requires_grad=true";
  return os << ")";
}

}  // namespace tessera
