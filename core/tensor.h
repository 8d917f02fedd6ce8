// Tensor: a cheap, reference-counted handle to a TensorImpl = (Storage, shape, strides, offset,
// dtype) plus the autograd metadata. Copying a Tensor copies the handle, not the data; views
// (reshape, permute, narrow, expand, ...) are new TensorImpls over the same Storage.
//
// The operations on tensors are free functions declared in ops/ops.h (add, matmul, softmax, ...);
// the member functions below are the most common of them, spelled the PyTorch way. This file and
// core/tensor.cpp hold only what needs no op: the members that run ops are defined beside the
// ops (ops/views.cpp, ops/tensor_methods.cpp) and the autograd accessors in autograd/
// (autograd/tensor_autograd.cpp), so core/ includes nothing above it.
#pragma once
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/core/device.h"
#include "tessera/core/dtype.h"
#include "tessera/core/shape.h"
#include "tessera/core/storage.h"

namespace tessera {

namespace autograd {
class Node;
}  // namespace autograd

// What autograd attaches to a tensor (autograd::AutogradMeta derives from this): core only owns
// and destroys it.
struct AutogradMetaInterface {
  virtual ~AutogradMetaInterface() = default;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::unique_ptr<AutogradMetaInterface> autograd;  // null for tensors that never touched autograd

  TensorImpl(std::shared_ptr<Storage> s, Shape sz, Shape st, int64_t off, DType dt);
  ~TensorImpl();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Fresh, uninitialised, contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  // The same from a given allocator (e.g. pinned host memory: cuda/device.h's pinned_allocator).
  static Tensor empty(const Shape& shape, DType dtype, Device device, Allocator& allocator);
  // Fresh, uninitialised, dense, its dims in memory in the order of `strides` (largest first, ties
  // in dim order), as torch.empty_like's preserve_format: a gradient laid out as the permuted view
  // it belongs to reaches the view's base without a copy.
  static Tensor empty_in_order(const Shape& shape, const Shape& strides, DType dtype, Device device);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return numel_of(impl().sizes); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  size_t element_size() const { return dtype_size(dtype()); }
  bool is_contiguous() const;
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // Host pointer to the first element (storage base + offset), for code that reads or writes
  // tensor data on the CPU. Refuses a tensor in device memory (copy it with .to(Device::cpu())
  // first); data<T>() also checks that T is the dtype.
  void* raw_data() const;
  template <class T>
  T* data() const {
    TS_CHECK(DTypeOf<T>::value == dtype(), "Tensor::data: requested ", dtype_name(DTypeOf<T>::value),
             " but the tensor is ", dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }
  // Pointer to the first element in the memory of the tensor's own device, host or GPU: for
  // device kernels and the copy path only, which know where it points.
  void* device_raw_data() const;
  template <class T>
  T* device_data() const {
    TS_CHECK(DTypeOf<T>::value == dtype(), "Tensor::device_data: requested ", dtype_name(DTypeOf<T>::value),
             " but the tensor is ", dtype_name(dtype()));
    return static_cast<T*>(device_raw_data());
  }
  // Value of a one-element tensor (any shape with numel 1), converted to double; a device tensor
  // is copied to the host first (which waits for its kernels).
  double item() const;
  // Copy of all elements, in logical (row-major) order, converted to T (copied to the host first).
  template <class T>
  std::vector<T> to_vector() const;

  // ---- views (no copy; differentiable) ---------------------------------------------------------
  Tensor view(const Shape& shape) const;     // requires compatible strides, -1 infers one dim
  Tensor reshape(const Shape& shape) const;  // view when possible, else a contiguous copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a dim; size-1 dims become stride 0
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor contiguous() const;  // self if already contiguous, else a copy (differentiable)

  // ---- conversions -----------------------------------------------------------------------------
  Tensor to(DType dtype) const;    // differentiable between floating dtypes
  Tensor to(Device device) const;  // differentiable
  Tensor clone() const;            // contiguous copy (differentiable)

  // ---- common ops as members (see ops/ops.h for all of them) -------------------------------------
  Tensor sum() const;
  Tensor mean() const;

  // ---- in-place (bump the storage version; refuse tensors that require grad while grad mode is
  //      on, so autograd never sees a silently modified input) -----------------------------------
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src to self's shape, converts dtype
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double value);
  uint64_t version() const { return impl().storage->version(); }

  // ---- autograd (autograd/ holds the machinery) --------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool value = true);  // leaves only
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined Tensor if no gradient has been accumulated
  void set_grad(const Tensor& g) const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Back-propagates from this tensor: a scalar (numel 1) if `gradient` is omitted.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // shares storage, no history

  TensorImpl& impl() const {
    TS_CHECK(impl_ != nullptr, "use of an undefined Tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A new CPU tensor holding a copy of `numel(shape)` elements of `dtype` from host memory `data`
// (op front ends, backends and tools build tensors from host buffers with it).
Tensor from_blob(const void* data, const Shape& shape, DType dtype);

std::ostream& operator<<(std::ostream& os, const Tensor& t);
// Short description for error messages: "float32[2, 3] on cpu".
std::string describe(const Tensor& t);

}  // namespace tessera
