// Host data pointers of a kernel's optional operands (internal): null for an undefined tensor.
#pragma once
#include "tessera/core/tensor.h"

namespace tessera::cpu {

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* mut_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace tessera::cpu
