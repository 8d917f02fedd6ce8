// The compute pool behind parallel_for (core/compute_pool.cpp): every iteration once, thread
// indices that never run two chunks at once, errors carried back, and jobs that end without the
// threads that never ran (the property that lets two threads keep their speed when another
// process takes a core). The ThreadSanitizer stage runs this file with several threads.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tessera/core/parallel.h"

using namespace tessera;

namespace {

// Sets the thread count for a scope.
struct ScopedThreads {
  int before = get_num_threads();
  explicit ScopedThreads(int n) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(before); }
};

// parallel_for over [begin, end): how often each iteration ran, and how many chunks there were.
struct Coverage {
  std::vector<int> hits;
  int chunks = 0;
};
Coverage cover(int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(end - begin));
  std::atomic<int> chunks{0};
  parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    ++chunks;
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i - begin)];
  });
  Coverage c;
  for (auto& h : hits) c.hits.push_back(h.load());
  c.chunks = chunks.load();
  return c;
}

// parallel_for over `chunks` chunks whose chunks on the caller take 20 us of work (so the workers
// have time to join) and on a worker sleep for `worker_chunk`; returns how many ran on a worker.
int on_workers(int64_t chunks, std::chrono::microseconds worker_chunk) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> n{0};
  parallel_for(0, chunks, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() == caller) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {}
      return;
    }
    ++n;
    std::this_thread::sleep_for(worker_chunk);
  });
  return n.load();
}

// A job held up by a worker's chunk (5 ms asleep stands for a worker that lost its core holding
// it), so that the caller then runs jobs alone for a while; false if no worker took a chunk.
bool hold_up_a_job() {
  for (int round = 0; round < 200; ++round)
    if (on_workers(64, std::chrono::milliseconds(5)) > 0) return true;
  return false;
}

}  // namespace

TEST_CASE("parallel_for runs every iteration once, in at most the chunks its grain allows", "[parallel]") {
  for (int threads : {1, 2, 3, 8}) {
    ScopedThreads scope(threads);
    for (auto [begin, end, grain] :
         {std::array<int64_t, 3>{0, 1, 1}, {5, 1005, 1}, {0, 1000, 7}, {0, 100, 100}, {-50, 50, 0}, {0, 100000, 16}}) {
      INFO("threads " << threads << ", [" << begin << ", " << end << "), grain " << grain);
      const Coverage c = cover(begin, end, grain);
      CHECK(c.hits == std::vector<int>(static_cast<size_t>(end - begin), 1));
      const int64_t most = grain > 0 ? (end - begin + grain - 1) / grain : end - begin;
      CHECK(c.chunks <= std::max<int64_t>(1, std::min<int64_t>(most, threads * detail::kChunksPerThread)));
      if (threads == 1 || end - begin <= grain) CHECK(c.chunks == 1);
    }
  }
  int calls = 0;
  parallel_for(3, 3, 1, [&](int64_t, int64_t) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("parallel_for's thread indices are below the thread count and never run two chunks at once", "[parallel]") {
  ScopedThreads scope(4);
  std::vector<std::atomic<int>> running(4);
  std::atomic<int> overlaps{0}, out_of_range{0}, nested_parallel{0};
  for (int round = 0; round < 200; ++round)
    parallel_for(0, 64, 1, [&](int64_t, int64_t) {
      const int t = parallel_thread_index();
      if (t < 0 || t >= 4) {
        ++out_of_range;
        return;
      }
      if (running[static_cast<size_t>(t)].fetch_add(1) != 0) ++overlaps;
      if (!in_parallel_region()) ++nested_parallel;
      int inner_chunks = 0;  // a parallel_for inside a chunk runs serially, on this thread
      parallel_for(0, 1000, 1, [&](int64_t, int64_t) { ++inner_chunks; });
      if (inner_chunks != 1) ++nested_parallel;
      running[static_cast<size_t>(t)].fetch_sub(1);
    });
  CHECK(out_of_range == 0);
  CHECK(overlaps == 0);
  CHECK(nested_parallel == 0);
  CHECK_FALSE(in_parallel_region());
  CHECK(parallel_thread_index() == 0);
}

TEST_CASE("a job ends without the threads that never ran: its caller does every chunk", "[parallel]") {
  // As when every other thread has lost its core: with OpenMP's fixed shares and closing barrier,
  // this job would wait for them.
  ScopedThreads scope(4);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0}, chunks{0};
  {
    detail::ScopedPausedWorkers paused;
    parallel_for(0, 1000, 1, [&](int64_t, int64_t) {
      ++chunks;
      if (std::this_thread::get_id() != caller) ++elsewhere;
    });
  }
  CHECK(chunks == 4 * detail::kChunksPerThread);
  CHECK(elsewhere == 0);
  // And the workers take chunks again afterwards (the job is long enough for them to wake).
  std::atomic<int> others{0};
  for (int round = 0; round < 50 && others == 0; ++round)
    parallel_for(0, 64, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller) ++others;
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (std::chrono::steady_clock::now() < until) {}
    });
  CHECK(others > 0);
}

TEST_CASE("after a worker held up a job, its caller runs the next jobs alone for a while, then shares again",
          "[parallel]") {
  ScopedThreads scope(2);
  REQUIRE(hold_up_a_job());
  CHECK(on_workers(64, std::chrono::microseconds(0)) == 0);     // alone: the workers took nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // past the longest back-off
  int shared = 0;
  for (int round = 0; round < 200 && shared == 0; ++round) shared = on_workers(64, std::chrono::microseconds(20));
  CHECK(shared > 0);
}

TEST_CASE("an exception thrown in a chunk reaches the caller after every chunk has ended", "[parallel]") {
  ScopedThreads scope(3);
  std::atomic<int> ended{0};
  const auto job = [&] {
    ended = 0;
    parallel_for(0, 12, 1, [&](int64_t b, int64_t) {
      ++ended;
      if (b == 5) throw std::runtime_error("chunk 5 failed");
    });
  };
  CHECK_THROWS_WITH(job(), "chunk 5 failed");
  CHECK(ended == 12);
  CHECK(cover(0, 100, 1).hits == std::vector<int>(100, 1));  // and the pool still works
  // The same when the caller runs the job alone, after a job held up by a worker.
  REQUIRE(hold_up_a_job());
  CHECK_THROWS_WITH(job(), "chunk 5 failed");
  CHECK(ended == 12);
}

TEST_CASE("parallel_for from two threads at once: each job runs every iteration once", "[parallel]") {
  ScopedThreads scope(2);
  std::vector<std::vector<int>> results(2);
  {
    std::vector<std::thread> callers;
    for (int t = 0; t < 2; ++t)
      callers.emplace_back([&, t] {
        std::vector<int> ok;
        for (int round = 0; round < 100; ++round) ok.push_back(cover(0, 333, 1).hits == std::vector<int>(333, 1));
        results[static_cast<size_t>(t)] = ok;
      });
    for (std::thread& c : callers) c.join();
  }
  for (const std::vector<int>& r : results) CHECK(r == std::vector<int>(100, 1));
}

TEST_CASE("a forked child, which has none of the parent's workers, runs parallel_for", "[parallel]") {
  ScopedThreads scope(2);
  REQUIRE(cover(0, 100, 1).hits == std::vector<int>(100, 1));  // the parent's workers are started
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(cover(0, 1000, 1).hits == std::vector<int>(1000, 1) ? 0 : 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
