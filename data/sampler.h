// Sharding an epoch over the processes of a data-parallel job, as timm does with PyTorch's
// DistributedSampler: the epoch order (shuffled by seed and epoch, the same on every rank) is
// padded by repeating its head until its length divides by the number of ranks, and rank r takes
// positions r, r + world, r + 2·world, ... So every rank has the same number of samples, the
// ranks together see every sample, and step k of world ranks with batch b holds exactly the
// samples of step k of one process with batch world·b.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera::data {

struct Shard {
  std::vector<int64_t> indices;     // dataset indices, in this rank's order
  std::vector<int64_t> positions;   // each one's position in the padded global order (its random stream)
  int64_t size_before_padding = 0;  // global positions at or past this repeat the head (padding)
};

// order: the epoch's global order; 0 <= rank < world.
Shard shard_order(const std::vector<int64_t>& order, int rank, int world);

}  // namespace tessera::data
