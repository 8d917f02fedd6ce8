// The thread's active FlopCounter; see autograd/flop_counter.h.
#include "tessera/autograd/flop_counter.h"

#include "tessera/autograd/profiler.h"

namespace tessera {

namespace {
thread_local FlopCounter* active = nullptr;
}

FlopCounter::FlopCounter() : previous_(active) { active = this; }
FlopCounter::~FlopCounter() { active = previous_; }

void FlopCounter::add(int64_t macs) {
  if (active) active->macs_ += macs;
  Profiler::add_macs(macs);
}

}  // namespace tessera
