#include "core/parallel.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"

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
std::atomic<int> num_threads{default_threads()};
}  // namespace

void set_num_threads(int n) {
  TS_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  num_threads = n;
}

int get_num_threads() { return num_threads.load(); }

}  // namespace tessera
