// Parity weights: a deterministic formula for every parameter and buffer of a model, keyed by its
// name, computed bit for bit the same here and in tools/gen_goldens.py (parity_tensor there). The
// goldens of timm's real named variants store no weights (millions of parameters): both sides
// fill their model with these values instead. The formula (the generator's docstring has it too):
//
//   tensors: named_parameters() then named_buffers() (unique tensors, first path wins, as in
//            PyTorch); element i in row-major order
//   h = FNV-1a 32-bit hash of the name;  x = fmix32(h + i * 0x9E3779B9)  (uint32 arithmetic,
//   fmix32 = MurmurHash3's finalizer);  u = (x >> 8) / 2^24 - 0.5  (a multiple of 2^-24 in [-0.5, 0.5))
//   "...temperature", "...running_var":  1 + u/2
//   "...weight" with >= 2 dims:          4u / sqrt(fan_in), fan_in = numel / shape[0]
//   "...weight" with 1 dim (norms):      1 + u/4
//   anything else:                       u/4
//   the input image ("input"):           4u
// in double, rounded once to float; integer buffers (num_batches_tracked) are 0. The scales are
// powers of two, so every value but the weights' division is exact in double and FMA contraction
// (-march=native) cannot change a bit; division and sqrt are correctly rounded IEEE operations.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/nn/module.h"
#include "tessera/ops/ops.h"

namespace tessera::testing {

inline uint32_t fnv1a32(std::string_view s) {
  uint32_t h = 0x811C9DC5u;
  for (unsigned char c : s) h = (h ^ c) * 0x01000193u;
  return h;
}

// u for element i of the tensor whose name hashes to h.
inline double parity_unit(uint32_t h, uint64_t i) {
  uint32_t x = h + static_cast<uint32_t>(i) * 0x9E3779B9u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return static_cast<double>(x >> 8) / 16777216.0 - 0.5;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The tensor `name` of the formula: float32, or zeros for an integer dtype.
inline Tensor parity_tensor(const std::string& name, const Shape& shape, DType dtype = DType::Float32) {
  if (!is_floating(dtype)) return zeros(shape, dtype);
  Tensor t = Tensor::empty(shape, DType::Float32);
  float* out = t.data<float>();
  const uint32_t h = fnv1a32(name);
  const int64_t n = t.numel();
  const bool weight = ends_with(name, "weight");
  const double sqrt_fan = weight && shape.size() >= 2 && n > 0 ? std::sqrt(static_cast<double>(n / shape[0])) : 1.0;
  for (int64_t i = 0; i < n; ++i) {
    const double u = parity_unit(h, static_cast<uint64_t>(i));
    double v;
    if (name == "input") v = 4.0 * u;
    else if (ends_with(name, "temperature") || ends_with(name, "running_var")) v = 1.0 + u / 2.0;
    else if (weight && shape.size() >= 2) v = u * 4.0 / sqrt_fan;
    else if (weight) v = 1.0 + u / 4.0;
    else v = u / 4.0;
    out[i] = static_cast<float>(v);
  }
  return t;
}

// The tensors the formula fills, in its order: named_parameters() then named_buffers().
inline nn::NamedTensors parity_targets(const nn::Module& model) {
  nn::NamedTensors all = model.named_parameters();
  for (auto& entry : model.named_buffers()) all.push_back(std::move(entry));
  return all;
}

// Overwrites every parameter and buffer of `model` with the formula's values (in its dtype).
inline void fill_parity_weights(nn::Module& model) {
  NoGradGuard no_grad;
  for (auto& [name, t] : parity_targets(model)) t.copy_(parity_tensor(name, t.shape(), t.dtype()));
}

}  // namespace tessera::testing
