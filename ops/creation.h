// Tensor creation. Random tensors draw from a Generator (seedable); the default generator is
// global and seeded with manual_seed().
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/graph.h"
#include "tessera/core/tensor.h"

namespace tessera {

// A seedable random stream: Philox4x32-10 (core/philox.h) keyed by the seed, with a running
// offset. A request for n values reserves n counters, so filling a tensor is parallel and gives
// the same values for a given seed and call sequence whatever the thread count.
//
// Inside a CUDA Graph capture (core/graph.h), a device kernel's draw is recorded against the
// generator's seed and offset as device memory, which the host rewrites from this generator before
// each replay and then advances by the draws the graph makes: every replay draws the numbers that
// the same step run eagerly would have drawn. The generator must outlive the graphs that use it.
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
  // Reserves n counters and returns the first (a draw on the host: refused inside a capture).
  uint64_t reserve(uint64_t n) {
    check_not_capturing("a random draw on the host",
                        "the graph would replay the numbers drawn now, and the host would not draw again");
    uint64_t first = offset_;
    offset_ += n;
    return first;
  }
  // Reserves n counters for a kernel that draws on `device`. Outside a capture: the seed and the
  // first counter. Inside one: the first counter relative to the offset at replay, which the kernel
  // reads with the seed from `replayed_stream` (device memory, {seed, offset}).
  struct KernelDraw {
    uint64_t seed;
    uint64_t first;
    const uint64_t* replayed_stream;
  };
  KernelDraw reserve_for_kernel(Device device, uint64_t n);
  // The values of counter c (pure functions of seed and c).
  double uniform_at(uint64_t counter) const;  // [0, 1)
  double normal_at(uint64_t counter) const;   // standard normal (Box-Muller)
  double uniform() { return uniform_at(reserve(1)); }
  double normal() { return normal_at(reserve(1)); }

 private:
  struct CapturedStream;  // this generator's draws in the capture under way
  uint64_t seed_;
  uint64_t offset_ = 0;
  std::shared_ptr<CapturedStream> captured_;
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
// A 0-d constant holding `value` with like's dtype and device, which no one may write. On a device
// it is kept (up to a few thousand distinct constants, for the life of the process), so the
// constant of an expression such as x * 0.5 costs a fill launch once, not at every step; a
// constant first asked for inside a CUDA Graph capture is made afresh (its fill is the graph's).
Tensor constant_scalar(double value, const Tensor& like);

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
