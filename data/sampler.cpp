#include "tessera/data/sampler.h"

#include "tessera/core/error.h"

namespace tessera::data {

Shard shard_order(const std::vector<int64_t>& order, int rank, int world) {
  TS_CHECK(world >= 1 && rank >= 0 && rank < world, "shard_order: rank ", rank, " is not in [0, ", world, ")");
  const int64_t n = static_cast<int64_t>(order.size());
  TS_CHECK(n > 0, "shard_order: the epoch is empty");
  const int64_t per_rank = (n + world - 1) / world;
  Shard s;
  s.size_before_padding = n;
  s.indices.reserve(static_cast<size_t>(per_rank));
  s.positions.reserve(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) {
    const int64_t position = rank + k * world;
    s.positions.push_back(position);
    s.indices.push_back(order[static_cast<size_t>(position % n)]);  // past the end: the head again
  }
  return s;
}

}  // namespace tessera::data
