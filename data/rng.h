// The random stream of one sample's augmentation. Every draw is a pure function of
// (seed, epoch, sample index, draw number) through Philox4x32-10 (core/philox.h), so an epoch's
// batches are identical whatever the number of loader threads and whichever thread serves a sample,
// and a resumed run replays exactly the stream it would have seen.
#pragma once
#include <cmath>
#include <cstdint>

#include "tessera/core/philox.h"

namespace tessera::data {

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t index)
      : key_(seed ^ (0x9E3779B97F4A7C15ull * (epoch + 1))), counter_(index << 24) {}

  // Uniform in [0, 1) with 32 bits of resolution.
  double uniform() { return next() * (1.0 / 4294967296.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi] (inclusive, as Python's random.randint).
  int64_t randint(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(uniform() * static_cast<double>(hi - lo + 1));
  }
  bool bernoulli(double p) { return uniform() < p; }
  // Standard normal by Box-Muller.
  double normal(double mean = 0.0, double std = 1.0) {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint32_t next() {
    if (used_ == 4) {
      block_ = philox4x32(counter_++, key_);
      used_ = 0;
    }
    return block_[used_++];
  }
  uint64_t key_, counter_;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;
};

}  // namespace tessera::data
