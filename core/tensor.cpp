#include "tessera/core/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace tessera {

TensorImpl::TensorImpl(std::shared_ptr<Storage> s, Shape sz, Shape st, int64_t off, DType dt)
    : storage(std::move(s)), sizes(std::move(sz)), strides(std::move(st)), offset(off), dtype(dt) {}

TensorImpl::~TensorImpl() = default;

namespace {
size_t checked_nbytes(const Shape& shape, DType dtype) {
  for (int64_t s : shape) TS_CHECK(s >= 0, "empty: negative dimension in shape ", shape);
  return static_cast<size_t>(numel_of(shape)) * dtype_size(dtype);
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  auto storage = std::make_shared<Storage>(checked_nbytes(shape, dtype), device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, Allocator& allocator) {
  auto storage = std::make_shared<Storage>(checked_nbytes(shape, dtype), device, allocator);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

Tensor Tensor::empty_in_order(const Shape& shape, const Shape& strides, DType dtype, Device device) {
  TS_CHECK(strides.size() == shape.size(), "empty_in_order: strides ", strides, " for shape ", shape);
  std::vector<size_t> order(shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  Shape dense(shape.size());
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    dense[order[k]] = step;
    step *= std::max<int64_t>(shape[order[k]], 1);
  }
  auto storage = std::make_shared<Storage>(checked_nbytes(shape, dtype), device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, dense, 0, dtype));
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

void* Tensor::device_raw_data() const {
  return static_cast<char*>(impl().storage->data()) + offset() * static_cast<int64_t>(element_size());
}

void* Tensor::raw_data() const {
  TS_CHECK(device().is_cpu(), "Tensor::data: ", describe(*this),
           " lives in device memory, which host code cannot read; copy it with .to(Device::cpu()) first");
  return device_raw_data();
}

Tensor Tensor::detach() const {
  return Tensor(std::make_shared<TensorImpl>(impl().storage, shape(), strides(), offset(), dtype()));
}

Tensor from_blob(const void* data, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  if (t.numel() > 0) std::memcpy(t.raw_data(), data, static_cast<size_t>(t.numel()) * dtype_size(dtype));
  return t;
}

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  return detail::concat(dtype_name(t.dtype()), t.shape(), " on ", t.device().str());
}

}  // namespace tessera
