// Deterministic cross-row sums for CPU kernels (internal): a fixed number of blocks, each
// accumulated in double, and the block partials added in a fixed order, so the result does not
// depend on the thread count (layer norm's and LayerScale's parameter gradients, batch norm's
// per-channel statistics).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/core/parallel.h"

namespace tessera::cpu {

constexpr int64_t kMaxBlocks = 32;

// Splits [0, count) into at most kMaxBlocks blocks, runs body(begin, end, acc) for each in
// parallel, each with its own zeroed `width`-wide double accumulator rows (`k` of them, acc[j·width
// + i]), and returns the accumulators summed over blocks: result[j·width + i] for accumulator j.
template <class Body>
std::vector<double> blocked_sums(int64_t count, int64_t width, int k, const Body& body) {
  const int64_t blocks = std::max<int64_t>(1, std::min(kMaxBlocks, count));
  std::vector<double> partial(static_cast<size_t>(blocks * k * width), 0.0);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      body(count * b / blocks, count * (b + 1) / blocks, partial.data() + b * k * width);
  });
  std::vector<double> total(static_cast<size_t>(k * width), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < k * width; ++i) total[i] += partial[b * k * width + i];
  return total;
}

}  // namespace tessera::cpu
