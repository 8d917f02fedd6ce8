// CPU parallelism: one parallel_for used by every CPU kernel, run by Tessera's compute pool
// (core/compute_pool.cpp). The thread count defaults to the cores available and can be set at run
// time (set_num_threads, or the TESSERA_NUM_THREADS / OMP_NUM_THREADS environment variables).
//
// Why not OpenMP: an OpenMP parallel region gives each thread a fixed share and ends at a barrier
// that waits for every thread of the team, so when another process takes a core, every region
// waits for the descheduled thread (on 2 cores, 2 threads ran at 0.55-0.69x of 1 thread;
// docs/benchmarks.md, "Under load"). The pool cuts a range into more chunks than threads; each
// thread starts on its own contiguous share (the same rows op after op, as a static schedule
// gives) and, once it is done, takes chunks from the end of the others' shares. A region ends when
// its chunks are done, whichever threads did them: a thread that never woke up costs nothing.
#pragma once
#include <cstdint>

namespace tessera {

void set_num_threads(int n);
int get_num_threads();

// Caps the calling thread's parallel_for at `n` threads while it lives (nests; the previous cap
// returns on destruction). Helper threads that run tensor code beside the compute threads - the
// data loader's workers - use ScopedThreadLimit(1) so they do not each start a full team and
// oversubscribe the cores the training step is using.
class ScopedThreadLimit {
 public:
  explicit ScopedThreadLimit(int n);
  ~ScopedThreadLimit();
  ScopedThreadLimit(const ScopedThreadLimit&) = delete;
  ScopedThreadLimit& operator=(const ScopedThreadLimit&) = delete;

 private:
  int previous_;
};

// True while the calling thread runs a chunk of a parallel_for: a parallel_for started there runs
// serially, and a library call made there (oneDNN) should be single-threaded.
bool in_parallel_region();

// The index, in [0, get_num_threads()), of the thread running the current chunk (0 outside a
// parallel_for): for per-thread workspaces. Two chunks with the same index never run at once.
int parallel_thread_index();

// Calls f(begin_i, end_i) over disjoint chunks covering [begin, end), no more chunks than `grain`
// iterations each would give, in any order and on any of the threads. Runs serially when the range
// is at most `grain` iterations, with one thread, or inside a parallel region. An exception thrown
// by f is rethrown to the caller once every chunk has ended.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f);

namespace detail {
// Runs chunk(context, c) for c in [0, chunks) on up to `threads` threads, the caller among them.
void run_chunks(int64_t chunks, int threads, void (*chunk)(const void* context, int64_t c), const void* context);
// For tests: while one lives, the workers take no chunks, so every job runs on its caller alone,
// as when every other thread has lost its core.
struct ScopedPausedWorkers {
  ScopedPausedWorkers();
  ~ScopedPausedWorkers();
  ScopedPausedWorkers(const ScopedPausedWorkers&) = delete;
  ScopedPausedWorkers& operator=(const ScopedPausedWorkers&) = delete;
};
// Chunks per thread: enough for a thread that is descheduled to leave its share to the others,
// few enough that a chunk's setup (a kernel's scratch, a GEMM's packing) stays small.
constexpr int64_t kChunksPerThread = 4;
}  // namespace detail

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int threads = get_num_threads();
  if (n <= grain || threads <= 1 || in_parallel_region()) {
    f(begin, end);
    return;
  }
  grain = grain < 1 ? 1 : grain;
  const int64_t most = (n + grain - 1) / grain;
  const int64_t chunks = most < threads * detail::kChunksPerThread ? most : threads * detail::kChunksPerThread;
  struct Context {
    const F* f;
    int64_t begin, n, chunks;
  } context{&f, begin, n, chunks};
  detail::run_chunks(
      chunks, threads,
      [](const void* p, int64_t c) {
        const Context& x = *static_cast<const Context*>(p);
        (*x.f)(x.begin + x.n * c / x.chunks, x.begin + x.n * (c + 1) / x.chunks);
      },
      &context);
}

}  // namespace tessera
