#include "tessera/core/dtype.h"

#include "tessera/core/half.h"

namespace tessera {

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::Bool: return 1;
  }
  return 0;
}

BFloat16::BFloat16(float f) : bits(float_to_bf16_bits(f)) {}
BFloat16::operator float() const { return bf16_bits_to_float(bits); }

Float16::Float16(float f) : bits(float_to_half_bits(f)) {}
Float16::operator float() const { return half_bits_to_float(bits); }

}  // namespace tessera
