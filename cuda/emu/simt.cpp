// The SIMT emulator's scheduler (see simt.h for what it checks).
//
// A block's threads are fibers. The scheduler runs in rounds: every runnable thread is resumed once,
// in the round's order, and runs until it finishes, reaches __syncthreads, or waits in a warp
// collective. A warp collective completes as soon as the last lane of its mask deposits its value
// (that lane goes on; the others become runnable). When a round ends with no thread runnable,
// either every live thread waits at the same __syncthreads (the barrier opens) or the block is
// stuck, which on a GPU is a hang or undefined behaviour and here is an error that says which
// threads wait where.
#include "tessera/cuda/emu/simt.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/cuda/emu/fiber.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TS_EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TS_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TS_EMU_POISON(p, n) ((void)(p), (void)(n))
#define TS_EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tessera::cuda::emu {

namespace {

constexpr size_t kRedzone = 64;  // poisoned bytes around every shared array
constexpr unsigned kMaxThreadsPerBlock = 1024;
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStackBytes = 512 * 1024;  // ASan's frames and redzones are large
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif

enum class State : uint8_t { Runnable, AtBarrier, AtWarp, Finished };

struct Thread {
  Fiber* fiber = nullptr;
  ThreadInfo info;
  unsigned linear = 0, lane = 0, warp = 0;
  State state = State::Runnable;
  std::source_location site;  // where it waits
  size_t shared_cursor = 0;
  uint64_t warp_generation = 0;  // the collective it deposited into
  const char* warp_what = "";
};

struct Warp {
  unsigned lanes = 0;    // lanes that exist (a partial last warp has fewer than 32)
  unsigned arrived = 0;  // lanes that deposited into the open collective
  unsigned mask = 0;     // its mask (taken from the first lane to arrive)
  uint64_t generation = 0;
  uint64_t values[2][kWarpSize] = {};  // by generation parity, so a lane racing ahead never overwrites
};

struct Block {
  const GridConfig* config = nullptr;
  void (*body)(void*) = nullptr;
  void* closure = nullptr;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::vector<unsigned char> shared;  // dynamic region, then the static arrays
  size_t static_begin = 0;
  std::exception_ptr error;
  // The threads of the current round, in the round's order, and the next to run.
  std::vector<Thread*> round;
  size_t next_in_round = 0;
};

TS_EMU_FAST_TLS thread_local Block* running_block = nullptr;
TS_EMU_FAST_TLS thread_local Thread* running_thread = nullptr;

std::atomic<uint64_t> launches{0};

ThreadOrder order_from_environment() {
  const char* v = std::getenv("TESSERA_EMU_ORDER");
  const std::string s = v ? v : "cycle";
  if (s == "forward") return ThreadOrder::Forward;
  if (s == "reverse") return ThreadOrder::Reverse;
  if (s == "shuffled") return ThreadOrder::Shuffled;
  return ThreadOrder::Cycle;
}
// Read from the environment on first use (a function-local static), not during static
// initialisation, whose order across translation units nothing fixes.
std::atomic<ThreadOrder>& configured_order() {
  static std::atomic<ThreadOrder> order{order_from_environment()};
  return order;
}

std::string dim_str(const dim3& d) { return detail::concat("(", d.x, ", ", d.y, ", ", d.z, ")"); }
std::string site_str(const std::source_location& s) {
  std::string file = s.file_name();
  const size_t slash = file.rfind('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(s.line());
}

[[noreturn]] void fail(const Block& b, const std::string& what) {
  const GridConfig& c = *b.config;
  throw Error(detail::concat("cuda emulator: kernel '", c.kernel, "' (grid ", dim_str(c.grid), ", block ",
                             dim_str(c.block), "): ", what));
}

// Orders `ids` in place for one round.
void arrange(std::vector<Thread*>& ids, ThreadOrder order, std::mt19937_64& rng) {
  if (order == ThreadOrder::Reverse) std::reverse(ids.begin(), ids.end());
  else if (order == ThreadOrder::Shuffled) std::shuffle(ids.begin(), ids.end(), rng);
}

// The fiber of the round's next thread, made the running thread, or null (back to the scheduler)
// when the round is over.
Fiber* next_of_round(Block& b) {
  if (b.next_in_round == b.round.size()) {
    running_thread = nullptr;
    current_thread = nullptr;
    return nullptr;
  }
  Thread* t = b.round[b.next_in_round++];
  running_thread = t;
  current_thread = &t->info;
  return t->fiber;
}

// The running thread waits (at a barrier or in a warp collective): the round goes on without it.
void wait_here() { Fiber::switch_to(next_of_round(*running_block)); }

Fiber* thread_entry(void* arg) {
  auto* t = static_cast<Thread*>(arg);
  Block& b = *running_block;
  try {
    b.body(b.closure);
  } catch (...) {
    if (!b.error) b.error = std::current_exception();
    t->state = State::Finished;
    running_thread = nullptr;
    current_thread = nullptr;
    return nullptr;  // the launch fails: straight back to the scheduler
  }
  t->state = State::Finished;
  return next_of_round(b);
}

// No thread is runnable and some have not finished: open the barrier they all wait at, or fail.
void resolve_stall(Block& b) {
  std::vector<const Thread*> at_barrier, at_warp;
  for (const Thread& t : b.threads) {
    if (t.state == State::AtBarrier) at_barrier.push_back(&t);
    else if (t.state == State::AtWarp) at_warp.push_back(&t);
  }
  if (!at_warp.empty()) {
    const Thread& t = *at_warp.front();
    const Warp& w = b.warps[t.warp];
    std::string missing;
    for (unsigned l = 0; l < kWarpSize; ++l) {
      if (!(w.mask >> l & 1u) || (w.arrived >> l & 1u)) continue;
      std::string where = "does not exist";
      if (w.lanes >> l & 1u) {
        const Thread& o = b.threads[t.warp * kWarpSize + l];
        where = o.state == State::Finished    ? "has exited"
                : o.state == State::AtBarrier ? "waits at __syncthreads " + site_str(o.site)
                                              : "waits at " + std::string(o.warp_what) + " " + site_str(o.site);
      }
      missing += detail::concat(missing.empty() ? "" : "; ", "lane ", l, " ", where);
    }
    fail(b, detail::concat(t.warp_what, " at ", site_str(t.site), " in warp ", t.warp, " waits for lanes of mask 0x",
                           std::hex, w.mask, std::dec, " that never arrive: ", missing));
  }
  // Everyone still alive waits at a barrier: it must be the same barrier.
  const Thread& first = *at_barrier.front();
  for (const Thread* t : at_barrier)
    if (t->site.line() != first.site.line() || std::string(t->site.file_name()) != first.site.file_name())
      fail(b, detail::concat("divergent __syncthreads: thread ", dim_str(first.info.thread_idx), " waits at ",
                             site_str(first.site), " but thread ", dim_str(t->info.thread_idx), " at ",
                             site_str(t->site)));
  for (Thread& t : b.threads)
    if (t.state == State::AtBarrier) t.state = State::Runnable;
}

// Fills the block's shared memory with NaN bytes and (under ASan) poisons all of it but the
// dynamic region; static arrays are unpoisoned as the kernel declares them.
void reset_shared(Block& b) {
  TS_EMU_UNPOISON(b.shared.data(), b.shared.size());
  std::fill(b.shared.begin(), b.shared.end(), static_cast<unsigned char>(0xFF));
  TS_EMU_POISON(b.shared.data(), b.shared.size());
  TS_EMU_UNPOISON(b.shared.data(), b.config->dynamic_shared_bytes);
}

class FiberPool {
 public:
  Fiber* get(size_t i) {
    while (fibers_.size() <= i) fibers_.push_back(std::make_unique<Fiber>(kStackBytes));
    return fibers_[i].get();
  }

 private:
  std::vector<std::unique_ptr<Fiber>> fibers_;
};
thread_local FiberPool fiber_pool;

void run_block(Block& b, ThreadOrder order, std::mt19937_64& rng) {
  reset_shared(b);
  for (Thread& t : b.threads) {
    t.state = State::Runnable;
    t.shared_cursor = b.static_begin;
    t.fiber->start(&thread_entry, &t);
  }
  for (Warp& w : b.warps) {
    w.arrived = 0;
    w.mask = 0;
  }
  std::vector<Thread*>& round = b.round;
  round.reserve(b.threads.size());
  for (;;) {
    round.clear();
    bool all_finished = true;
    for (Thread& t : b.threads) {
      if (t.state == State::Runnable) round.push_back(&t);
      all_finished = all_finished && t.state == State::Finished;
    }
    if (all_finished) return;
    if (round.empty()) {
      resolve_stall(b);
      continue;
    }
    arrange(round, order, rng);
    // Each thread of the round runs until it finishes or waits, then hands over to the next; the
    // last one returns here.
    b.next_in_round = 0;
    next_of_round(b)->resume();
    if (b.error) std::rethrow_exception(b.error);
  }
}

void check_config(const Block& b) {
  const GridConfig& c = *b.config;
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  if (threads == 0 || uint64_t{c.grid.x} * c.grid.y * c.grid.z == 0) fail(b, "empty grid or block");
  if (threads > kMaxThreadsPerBlock || c.block.z > 64)
    fail(b, detail::concat(threads, " threads per block; the limit is ", kMaxThreadsPerBlock, " (and 64 in z)"));
  if (c.grid.y > 65535 || c.grid.z > 65535 || c.grid.x > 0x7fffffffu)
    fail(b, "grid dimensions beyond (2^31 - 1, 65535, 65535)");
  if (c.dynamic_shared_opt_in > 0 && c.dynamic_shared_bytes > c.dynamic_shared_opt_in)
    fail(b, detail::concat(c.dynamic_shared_bytes, " bytes of dynamic shared memory; its kernel opted in to ",
                           c.dynamic_shared_opt_in, " (cudaFuncAttributeMaxDynamicSharedMemorySize)"));
  if (c.dynamic_shared_opt_in == 0 && c.dynamic_shared_bytes > kSharedBytesPerBlock)
    fail(b,
         detail::concat(c.dynamic_shared_bytes, " bytes of dynamic shared memory; a block may use ",
                        kSharedBytesPerBlock, " unless its kernel opts in to more (up to ", kSharedBytesPerBlockOptIn,
                        ") with cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) "
                        "on its device"));
}

}  // namespace

void set_thread_order(ThreadOrder order) { configured_order() = order; }
ThreadOrder thread_order() { return configured_order(); }
uint64_t launch_count() { return launches.load(); }

void run_grid(const GridConfig& config, void (*body)(void*), void* closure) {
  TS_CHECK(running_block == nullptr, "cuda emulator: kernel '", config.kernel,
           "' launched from inside a kernel (dynamic parallelism is not emulated)");
  // The block state and its buffers are kept from launch to launch on this OS thread: a training
  // step makes thousands of small launches, and under ASan every allocation records a stack.
  thread_local Block scratch;
  thread_local std::vector<dim3> blocks;
  Block& b = scratch;
  b.config = &config;
  b.body = body;
  b.closure = closure;
  b.error = nullptr;
  check_config(b);
  const uint64_t launch = launches.fetch_add(1);
  ThreadOrder order = configured_order();
  if (order == ThreadOrder::Cycle) order = static_cast<ThreadOrder>(launch % 3);
  std::mt19937_64 rng(launch * 0x9E3779B97F4A7C15ull + 1);

  const dim3 bd = config.block, gd = config.grid;
  const unsigned nthreads = bd.x * bd.y * bd.z;
  b.threads.assign(nthreads, Thread{});
  b.warps.assign((nthreads + kWarpSize - 1) / kWarpSize, Warp{});
  for (unsigned i = 0; i < nthreads; ++i) {
    Thread& t = b.threads[i];
    t.fiber = fiber_pool.get(i);
    t.linear = i;
    t.lane = t.info.lane = i % kWarpSize;
    t.warp = i / kWarpSize;
    t.info.thread_idx = dim3(i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y));
    t.info.block_dim = bd;
    t.info.grid_dim = gd;
    b.warps[t.warp].lanes |= 1u << t.lane;
  }
  b.static_begin = (config.dynamic_shared_bytes + kRedzone + 63) / 64 * 64;
  b.shared.resize(b.static_begin + kSharedBytesPerBlock + kRedzone);

  blocks.clear();
  blocks.reserve(uint64_t{gd.x} * gd.y * gd.z);
  for (unsigned z = 0; z < gd.z; ++z)
    for (unsigned y = 0; y < gd.y; ++y)
      for (unsigned x = 0; x < gd.x; ++x) blocks.emplace_back(x, y, z);
  if (order == ThreadOrder::Reverse) std::reverse(blocks.begin(), blocks.end());
  else if (order == ThreadOrder::Shuffled) std::shuffle(blocks.begin(), blocks.end(), rng);

  running_block = &b;
  try {
    for (const dim3& bi : blocks) {
      for (Thread& t : b.threads) t.info.block_idx = bi;
      run_block(b, order, rng);
    }
  } catch (...) {
    running_block = nullptr;
    TS_EMU_UNPOISON(b.shared.data(), b.shared.size());
    throw;
  }
  running_block = nullptr;
  TS_EMU_UNPOISON(b.shared.data(), b.shared.size());
}

void fault(const char* what) { fail(*running_block, what); }

void syncthreads(const std::source_location& where) {
  Thread* t = running_thread;
  t->state = State::AtBarrier;
  t->site = where;
  wait_here();
}

const uint64_t* warp_exchange(unsigned mask, uint64_t value, const char* what, const std::source_location& where) {
  Block& b = *running_block;
  Thread* t = running_thread;
  Warp& w = b.warps[t->warp];
  if (!(mask >> t->lane & 1u))
    fail(b, detail::concat(what, " at ", site_str(where), ": lane ", t->lane, " is not in its own mask 0x", std::hex,
                           mask, std::dec));
  if (mask & ~w.lanes)
    fail(b,
         detail::concat(what, " at ", site_str(where), ": mask 0x", std::hex, mask, " names lanes that do not exist ",
                        "in warp ", std::dec, t->warp, " of a block of ", b.threads.size(), " threads"));
  if (w.arrived == 0) w.mask = mask;
  else if (w.mask != mask)
    fail(b, detail::concat(what, " at ", site_str(where), ": lanes of warp ", t->warp, " meet with different masks 0x",
                           std::hex, w.mask, " and 0x", mask));
  const uint64_t generation = w.generation;
  w.values[generation & 1][t->lane] = value;
  w.arrived |= 1u << t->lane;
  t->warp_generation = generation;
  t->warp_what = what;
  t->site = where;
  if (w.arrived == mask) {  // the last lane: the collective completes, the others may go on
    for (unsigned l = 0; l < kWarpSize; ++l)
      if ((mask >> l & 1u) && l != t->lane) b.threads[t->warp * kWarpSize + l].state = State::Runnable;
    w.arrived = 0;
    ++w.generation;
  } else {
    t->state = State::AtWarp;
    wait_here();
  }
  return w.values[generation & 1];
}

void* shared_static(size_t bytes, size_t alignment) {
  Block& b = *running_block;
  Thread* t = running_thread;
  const size_t begin = (t->shared_cursor + alignment - 1) / alignment * alignment;
  const size_t used = begin + bytes - b.static_begin;
  // A kernel that opted in reserves its attribute's dynamic bytes beside its static arrays, within
  // the opt-in limit (on a GPU cudaFuncSetAttribute refuses more); static arrays alone stay within
  // 48 KB (nvcc refuses more).
  const size_t opt_in = b.config->dynamic_shared_opt_in;
  const size_t dynamic = opt_in ? opt_in : b.config->dynamic_shared_bytes;
  const size_t limit = opt_in ? kSharedBytesPerBlockOptIn : kSharedBytesPerBlock;
  if (used > kSharedBytesPerBlock || used + dynamic > limit)
    fail(b, detail::concat("shared memory: ", used, " bytes of static arrays and ", dynamic, " dynamic exceed the ",
                           limit, " bytes a block may use"));
  t->shared_cursor = begin + bytes + kRedzone;
  TS_EMU_UNPOISON(b.shared.data() + begin, bytes);
  return b.shared.data() + begin;
}

void* shared_dynamic() { return running_block->shared.data(); }

}  // namespace tessera::cuda::emu
