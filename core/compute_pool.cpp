// The compute pool behind parallel_for (core/parallel.h says why it is not OpenMP).
//
// A job is `chunks` chunks cut into one contiguous share per participating thread (the caller is
// thread 0). Each share is one 64-bit word, [front, back) and the job's thread count, changed only
// by compare-and-swap: its owner claims from the front, a thread whose share is empty claims from
// the back of another's. A claim succeeds only against the word as it is now, so a thread that
// read a word of an older job (it was descheduled) can never claim a chunk twice or of the wrong
// job; what a chunk runs (function, context) is read only after its claim, from the job the word
// belongs to, which cannot end before that chunk does. The caller returns when `done` reaches
// `chunks`: it never waits for a thread that claimed nothing.
//
// Waiting: an idle worker spins briefly and then sleeps on the job counter (a futex); the caller
// wakes sleepers only when there are some. A worker that has had its core for kBurst yields it
// between chunks: when another process shares the core, the scheduler then takes it from the worker
// while it holds nothing. Measured on 2 cores (AMD EPYC Zen 5), one kept busy by another process,
// xcit_nano_12_p16_224 inference at 2 threads: 1.07x of 1 thread with a 1 ms burst, 1.03x with
// 0.5 ms, 0.94x without yielding (docs/benchmarks.md, "Under load").
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/core/parallel.h"

namespace tessera {

namespace {

constexpr int kMostThreads = 255;  // the thread count fits the share word's 8 bits
// How long an idle worker looks for the next job before it sleeps: long enough to span the gap
// between one kernel's parallel_for and the next, short enough not to hold a core between steps.
constexpr auto kSpin = std::chrono::microseconds(200);
// A worker that has run for kBurst gives its core away (sched_yield) between chunks, so that when
// another process shares its core, the scheduler takes the core from it while it holds no chunk,
// rather than in the middle of one, which would hold up the whole job until it runs again. A gap
// longer than kPreempted between two looks at the clock means the thread was descheduled.
constexpr auto kBurst = std::chrono::microseconds(1000);
constexpr auto kPreempted = std::chrono::microseconds(50);
// When the caller, done with every chunk it could claim, has waited for a worker's chunk far
// longer than its own chunks took (3x their mean, and at least kLeastStall), that worker lost its
// core while it held the chunk: the scheduler runs it again only at a later tick (4 ms here). The
// caller then runs the next jobs alone for kBackoff (doubled while it recurs, up to kMostBackoff;
// halved by each job that ends without such a wait): the workers sleep, and the scheduler can give
// the caller a core of its own. With both of 2 cores busy elsewhere, this took 2 threads from
// 0.5-0.9x of 1 thread to 1.3x (xcit_nano_12_p16_224 inference, AMD EPYC Zen 5).
constexpr auto kLeastStall = std::chrono::microseconds(300);
constexpr auto kBackoff = std::chrono::milliseconds(20);
constexpr auto kMostBackoff = std::chrono::milliseconds(200);

// A share: chunks [front, back) of a job run by `threads` threads.
struct Share {
  uint32_t front, back, threads;
};
constexpr uint64_t pack(Share s) { return uint64_t{s.front} | uint64_t{s.back} << 28 | uint64_t{s.threads} << 56; }
constexpr Share unpack(uint64_t w) {
  return {static_cast<uint32_t>(w & 0xfffffff), static_cast<uint32_t>(w >> 28 & 0xfffffff),
          static_cast<uint32_t>(w >> 56)};
}
constexpr int64_t kMostChunks = 0xfffffff;

struct alignas(64) ShareWord {
  std::atomic<uint64_t> word{0};
};

constinit thread_local bool in_region = false;
constinit thread_local int thread_index = 0;

struct Pool {
  std::mutex busy;  // one job at a time: a second caller meanwhile runs its chunks serially
  std::atomic<uint32_t> job{0};
  std::atomic<int> sleepers{0};
  ShareWord shares[kMostThreads];
  // The job, written by its caller before its shares are published.
  void (*chunk)(const void*, int64_t) = nullptr;
  const void* context = nullptr;
  std::atomic<int64_t> done{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  int workers = 0;                  // started (guarded by busy)
  std::atomic<bool> paused{false};  // detail::ScopedPausedWorkers
  // The back-off (kBackoff above; guarded by busy).
  std::chrono::steady_clock::time_point alone_until{};
  std::chrono::steady_clock::duration backoff{};

  // After a job: [start, worked) the caller's own chunks (`own` of them), [worked, ended) its wait.
  void note_wait(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point worked,
                 std::chrono::steady_clock::time_point ended, int own) {
    const auto mean = (worked - start) / std::max(own, 1);
    if (ended - worked > std::max<std::chrono::steady_clock::duration>(3 * mean, kLeastStall)) {
      backoff = std::clamp<std::chrono::steady_clock::duration>(2 * backoff, kBackoff, kMostBackoff);
      alone_until = ended + backoff;
    } else {
      backoff /= 2;
    }
  }

  void run(int self, int64_t c) {
    in_region = true;
    thread_index = self;
    try {
      chunk(context, c);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
    in_region = false;
    thread_index = 0;
    done.fetch_add(1, std::memory_order_acq_rel);
  }

  // Claims from the front of the own share; false when it is empty or not of a job for `self`.
  bool claim_own(int self) {
    std::atomic<uint64_t>& w = shares[self].word;
    uint64_t v = w.load(std::memory_order_acquire);
    for (;;) {
      const Share s = unpack(v);
      if (s.front >= s.back || static_cast<uint32_t>(self) >= s.threads) return false;
      if (w.compare_exchange_weak(v, pack({s.front + 1, s.back, s.threads}), std::memory_order_acq_rel)) {
        run(self, s.front);
        return true;
      }
    }
  }

  // Claims one chunk from the back of another's share; false when every share is empty.
  bool claim_other(int self) {
    // The others of the job this thread's own share was last published for.
    const uint32_t threads = std::max<uint32_t>(unpack(shares[self].word.load(std::memory_order_acquire)).threads, 1);
    for (uint32_t k = 1; k < threads; ++k) {
      const int other = static_cast<int>((static_cast<uint32_t>(self) + k) % threads);
      std::atomic<uint64_t>& w = shares[other].word;
      uint64_t v = w.load(std::memory_order_acquire);
      for (;;) {
        const Share s = unpack(v);
        if (s.front >= s.back || static_cast<uint32_t>(self) >= s.threads) break;
        if (w.compare_exchange_weak(v, pack({s.front, s.back - 1, s.threads}), std::memory_order_acq_rel)) {
          run(self, s.back - 1);
          return true;
        }
      }
    }
    return false;
  }

  // Claims and runs chunks until none is left, calling between() after each.
  template <class Between>
  void work(int self, const Between& between) {
    while (claim_own(self)) between();
    while (claim_other(self)) between();
  }

  void worker(int self) {
    using clock = std::chrono::steady_clock;
    uint32_t seen = job.load();
    clock::time_point burst = clock::now();  // since when this thread has had its core
    const auto yield_if_long = [&](clock::time_point now) {
      if (now - burst < kBurst) return;
      sched_yield();
      burst = clock::now();
    };
    for (;;) {
      clock::time_point last = clock::now();
      clock::duration spun{};
      for (int spins = 0; job.load(std::memory_order_acquire) == seen;) {
        if (++spins % 64 != 0) continue;
        const clock::time_point now = clock::now();
        if (now - last < kPreempted) spun += now - last;
        else burst = now;  // it was descheduled meanwhile: its core is its own again
        last = now;
        yield_if_long(now);
        if (spun > kSpin) {
          sleepers.fetch_add(1);
          while (job.load() == seen) job.wait(seen);
          sleepers.fetch_sub(1);
          burst = clock::now();
          break;
        }
      }
      seen = job.load(std::memory_order_acquire);
      if (!paused.load()) work(self, [&] { yield_if_long(clock::now()); });
    }
  }

  void start_workers(int count) {
    for (; workers < count; ++workers) std::thread([this, self = workers + 1] { worker(self); }).detach();
  }
};

// Never destroyed: a worker may still be asleep in it when the process exits. A forked child has
// none of the parent's workers, so it starts a pool of its own.
Pool* pool = new Pool;
const int fork_handler = pthread_atfork(nullptr, nullptr, [] { pool = new Pool; });

// Every chunk on the calling thread; as on the pool, an error is rethrown once all have run.
void run_serially(int64_t chunks, void (*chunk)(const void*, int64_t), const void* context) {
  const bool outer = in_region;
  in_region = true;
  std::exception_ptr error;
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      chunk(context, c);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  in_region = outer;
  if (error) std::rethrow_exception(error);
}

}  // namespace

bool in_parallel_region() { return in_region; }

int parallel_thread_index() { return in_region ? thread_index : 0; }

namespace detail {

ScopedPausedWorkers::ScopedPausedWorkers() { pool->paused = true; }
ScopedPausedWorkers::~ScopedPausedWorkers() { pool->paused = false; }

void run_chunks(int64_t chunks, int threads, void (*chunk)(const void*, int64_t), const void* context) {
  (void)fork_handler;
  threads = static_cast<int>(std::min<int64_t>({threads, chunks, kMostThreads}));
  if (threads <= 1 || chunks > kMostChunks || in_region) return run_serially(chunks, chunk, context);
  Pool& p = *pool;
  std::unique_lock<std::mutex> lock(p.busy, std::try_to_lock);
  if (!lock) return run_serially(chunks, chunk, context);
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  if (start < p.alone_until) return run_serially(chunks, chunk, context);
  p.start_workers(threads - 1);
  p.chunk = chunk;
  p.context = context;
  p.error = nullptr;
  p.done.store(0, std::memory_order_relaxed);
  for (int t = 0; t <= p.workers; ++t) {
    const uint32_t front = t < threads ? static_cast<uint32_t>(chunks * t / threads) : 0;
    const uint32_t back = t < threads ? static_cast<uint32_t>(chunks * (t + 1) / threads) : 0;
    p.shares[t].word.store(pack({front, back, static_cast<uint32_t>(threads)}), std::memory_order_release);
  }
  p.job.fetch_add(1);
  if (p.sleepers.load() > 0) p.job.notify_all();
  int own = 0;
  p.work(0, [&] { ++own; });
  const clock::time_point worked = clock::now();
  for (int spins = 0; p.done.load(std::memory_order_acquire) < chunks;)
    if (++spins % 64 == 0) sched_yield();
  p.note_wait(start, worked, clock::now(), own);
  if (p.error) std::rethrow_exception(p.error);
}

}  // namespace detail

}  // namespace tessera
