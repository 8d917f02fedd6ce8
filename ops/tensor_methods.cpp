// The members of Tensor that run ops (declared in core/tensor.h, which defines only what needs no
// op): element access through the host, in-place fills and copies, the reductions spelled as
// members, and printing. The view members are in ops/views.cpp.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "tessera/autograd/node.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/op_list.h"

namespace tessera {

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
  check_inplace(*this, op_name(OpId::fill_));
  fill_kernel[device()](*this, value);
  impl().storage->bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, op_name(OpId::copy_));
  TS_CHECK(src.device() == device(), "copy_: source on ", src.device().str(), " but destination on ", device().str(),
           " (use .to(device) first)");
  broadcast_shapes(src.shape(), shape(), op_name(OpId::copy_));
  Tensor expanded = src.detach().expand(shape());
  TS_CHECK(expanded.shape() == shape(), "copy_: cannot broadcast source ", src.shape(), " to ", shape());
  copy_kernel[device()](expanded, *this);
  impl().storage->bump_version();
  return *this;
}

namespace {
// self = self ∘ other, other broadcast to self's shape: one pass that writes self where it lies,
// or, when other shares self's memory (x.add_(x.t())), through a new tensor, which reading and
// writing the same memory in another order would need.
Tensor& binary_in_place(Tensor& self, BinaryOp op, const Tensor& other, const char* name) {
  if (other.impl().storage.get() == self.impl().storage.get())
    return self.copy_(op == BinaryOp::Add ? add(self, other) : mul(self, other));
  TS_CHECK(other.dtype() == self.dtype(), name, ": dtype mismatch, ", describe(self), " vs ", describe(other),
           " (convert one with .to(dtype))");
  TS_CHECK(other.device() == self.device(), name, ": operands on different devices, ", describe(self), " vs ",
           describe(other));
  TS_CHECK(broadcast_shapes(other.shape(), self.shape(), name) == self.shape(), name, ": cannot broadcast ",
           other.shape(), " to the destination's shape ", self.shape());
  binary_kernel[self.device()](op, self, other.detach().expand(self.shape()), self);
  self.impl().storage->bump_version();
  return self;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace(*this, op_name(OpId::add_));
  NoGradGuard no_grad;
  return binary_in_place(*this, BinaryOp::Add, alpha == 1.0 ? other : other * alpha, op_name(OpId::add_));
}

Tensor& Tensor::mul_(double value) {
  check_inplace(*this, op_name(OpId::mul_));
  NoGradGuard no_grad;
  return binary_in_place(*this, BinaryOp::Mul, constant_scalar(value, *this), op_name(OpId::mul_));
}

// ---- printing ------------------------------------------------------------------------------------

namespace {
void print_dim(std::ostream& os, const std::vector<double>& v, const Shape& shape, size_t d, int64_t base,
               bool integral, int indent) {
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
