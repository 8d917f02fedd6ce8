// The thread's active FlopCounter; see autograd/flop_counter.h.
#include "tessera/autograd/flop_counter.h"

#include "tessera/autograd/profiler.h"

namespace tessera {

namespace {
thread_local FlopCounter* active_counter = nullptr;
}

FlopCounter::FlopCounter() : previous_(active_counter) { active_counter = this; }
FlopCounter::~FlopCounter() { active_counter = previous_; }

void FlopCounter::add(int64_t macs) {
  if (active_counter) active_counter->macs_ += macs;
  Profiler::add_macs(macs);
}

}  // namespace tessera
