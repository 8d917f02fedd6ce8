// Tensor creation. Random tensors draw from a Generator (seedable); the default generator is
// global and seeded with manual_seed().
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/graph.h"
#include "tessera/core/tensor.h"

namespace tessera {

// A seedable random stream: Philox4x32-10 (core/philox.h) keyed by the seed, with a running
// offset. A request for n values reserves n counters, so filling a tensor is parallel and gives
// the same values for a given seed and call sequence whatever the thread count.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x7e55e7a) : seed_(seed) {}
  void seed(uint64_t s) {
    seed_ = s;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }  // with seed(), restores a saved state
  // Reserves n counters and returns the first.
  uint64_t reserve(uint64_t n) {
    check_not_capturing("a random draw (dropout, drop path, rand)",
                        "its Philox offset is host state, so every replay would repeat the same numbers");
    uint64_t first = offset_;
    offset_ += n;
    return first;
  }
  // The values of counter c (pure functions of seed and c).
  double uniform_at(uint64_t counter) const;  // [0, 1)
  double normal_at(uint64_t counter) const;   // standard normal (Box-Muller)
  double uniform() { return uniform_at(reserve(1)); }
  double normal() { return normal_at(reserve(1)); }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor empty_like(const Tensor& t);  // contiguous, same shape/dtype/device
// 0-d tensor holding `value`, with the dtype and device of `like`.
Tensor scalar_like(double value, const Tensor& like);
Tensor scalar_tensor(double value, DType dtype = DType::Float32, Device device = Device::cpu());

// [start, end) step `step`, like torch.arange.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor arange(int64_t end, DType dtype = DType::Int64, Device device = Device::cpu());

// Random tensors are drawn on `device` itself, with the same values on every device for a given
// generator state (ops/kernels/random.h).
Tensor randn(const Shape& shape, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = Device::cpu());
Tensor rand(const Shape& shape, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = Device::cpu());
// Normal(mean, std) truncated to [a, b] by the inverse CDF, as PyTorch's trunc_normal_ (timm's
// a=-2, b=2 are absolute bounds, not multiples of std).
Tensor trunc_normal(const Shape& shape, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                    DType dtype = DType::Float32, Generator* gen = nullptr, Device device = Device::cpu());

// Copies host data into a new CPU tensor; the value count must match the shape (.to(device) moves it).
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
Tensor from_vector(const std::vector<double>& values, const Shape& shape);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
// (from_blob, a copy of a host buffer, is core's: core/tensor.h.)

}  // namespace tessera
