// CPU parallelism: one OpenMP-backed parallel_for used by every CPU kernel. The thread count
// defaults to the cores available and can be set at run time (set_num_threads, or the
// TESSERA_NUM_THREADS / OMP_NUM_THREADS environment variables).
#pragma once
#include <cstdint>

namespace tessera {

void set_num_threads(int n);
int get_num_threads();

// Caps the calling thread's parallel_for at `n` threads while it lives (nests; the previous cap
// returns on destruction). Helper threads that run tensor code beside the compute threads - the
// data loader's workers - use ScopedThreadLimit(1) so they do not each start a full OpenMP team
// and oversubscribe the cores the training step is using.
class ScopedThreadLimit {
 public:
  explicit ScopedThreadLimit(int n);
  ~ScopedThreadLimit();
  ScopedThreadLimit(const ScopedThreadLimit&) = delete;
  ScopedThreadLimit& operator=(const ScopedThreadLimit&) = delete;

 private:
  int previous_;
};

// Calls f(begin_i, end_i) over disjoint chunks covering [begin, end). Runs serially when the range
// is smaller than `grain` iterations or when already inside a parallel region.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f);

}  // namespace tessera

#include <omp.h>
#include <algorithm>

namespace tessera {

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int threads = get_num_threads();
  if (n <= grain || threads <= 1 || omp_in_parallel()) {
    f(begin, end);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = begin + n * c / chunks, e = begin + n * (c + 1) / chunks;
    f(b, e);
  }
}

}  // namespace tessera
