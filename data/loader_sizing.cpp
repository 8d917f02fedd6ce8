// The loader sizing rules (data/loader_sizing.h).
#include "tessera/data/loader_sizing.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace tessera::data {

namespace {
constexpr int kMaxWorkers = 32;
constexpr int kMinInFlight = 4;                        // batches
constexpr int kMaxPrefetch = 4;                        // batches per worker
constexpr int64_t kInFlightBudget = int64_t{2} << 30;  // bytes
}  // namespace

int auto_workers(int cores, bool feeds_gpu) {
  cores = std::max(cores, 1);
  return feeds_gpu ? std::clamp(cores - 1, 1, kMaxWorkers) : std::clamp(cores / 4, 1, 4);
}

int auto_prefetch(int workers, int64_t batch_bytes) {
  if (workers <= 0) return 1;
  int prefetch = std::clamp((kMinInFlight + workers - 1) / workers, 1, kMaxPrefetch);
  while (prefetch > 1 && static_cast<int64_t>(workers) * prefetch * batch_bytes > kInFlightBudget) --prefetch;
  return prefetch;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return std::max(static_cast<int>(std::thread::hardware_concurrency()), 1);
}

}  // namespace tessera::data
