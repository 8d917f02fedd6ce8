// Kernel interface of data-dependent argument checks (internal): conditions on tensor *values*
// (an index in range, a class target below the class count), which a front end cannot check from
// shapes alone. The CPU kernel throws at once. A device kernel must not stop the host to read
// values back, so it records the first offending value on the device and the backend throws the
// error at the next synchronisation (a copy to the host, Tensor::item, synchronize()), like
// PyTorch's device-side asserts but as an ordinary tessera::Error; kernels that consume the values
// skip the offending ones meanwhile, so nothing reads out of bounds.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/core/dispatch.h"
#include "tessera/core/tensor.h"

namespace tessera {

// The message of a failed range check: "<subject> <value> at position <p> <condition>", e.g.
// "cross_entropy: target 12 at position 3 is out of range for 10 classes (expected 0 <= target < 10)".
struct RangeCheck {
  std::string subject;
  std::string condition;
  std::string message(int64_t value, int64_t position) const;
};

// Every value v of the int64 tensor `values` (any strides; position = logical row-major index)
// must satisfy 0 <= v < limit.
using CheckRangeKernel = void(const Tensor& values, int64_t limit, const RangeCheck& check);

}  // namespace tessera
