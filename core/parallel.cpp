#include "tessera/core/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "tessera/core/error.h"

namespace tessera {

namespace {
int default_threads() {
  for (const char* var : {"TESSERA_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(var)) {
      int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}
// 0 until first read or set: constant-initialised, so a caller in another translation unit's static
// initialiser never sees it before the environment has been read.
constinit std::atomic<int> num_threads{0};
constinit thread_local int thread_limit = 0;  // 0: no cap on this thread
}  // namespace

void set_num_threads(int n) {
  TS_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  num_threads = n;
}

int get_num_threads() {
  int n = num_threads.load();
  if (n == 0) {
    int unset = 0;
    num_threads.compare_exchange_strong(unset, default_threads());
    n = num_threads.load();
  }
  return thread_limit > 0 ? std::min(n, thread_limit) : n;
}

ScopedThreadLimit::ScopedThreadLimit(int n) : previous_(thread_limit) {
  TS_CHECK(n >= 1, "ScopedThreadLimit: expected a positive thread count, got ", n);
  thread_limit = n;
}

ScopedThreadLimit::~ScopedThreadLimit() { thread_limit = previous_; }

}  // namespace tessera
