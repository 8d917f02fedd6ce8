// Dtype dispatch for CUDA kernels that also take the half types. f.template operator()<S, A>()
// runs with S the stored element type and A the type the arithmetic runs in: float32 and float64
// compute in themselves, bfloat16 and float16 in float32 (values converted on load and store with
// ops/kernels/convert.h, so they round exactly as on the CPU). Other dtypes are an error naming
// the op.
#pragma once
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"

namespace tessera::cuda {

template <class F>
void dispatch_floating(DType dtype, const char* op, const F& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float, float>();
    case DType::Float64: return f.template operator()<double, double>();
    case DType::BFloat16: return f.template operator()<BFloat16, float>();
    case DType::Float16: return f.template operator()<Float16, float>();
    default:
      throw Error(detail::concat(op, ": dtype ", dtype_name(dtype),
                                 " is not supported (expected float32, float64, bfloat16 or float16)"));
  }
}

// dispatch_floating, plus int64 and bool (which compute in themselves).
template <class F>
void dispatch_any(DType dtype, const char* op, const F& f) {
  switch (dtype) {
    case DType::Int64: return f.template operator()<int64_t, int64_t>();
    case DType::Bool: return f.template operator()<bool, bool>();
    default: return dispatch_floating(dtype, op, f);
  }
}

}  // namespace tessera::cuda
