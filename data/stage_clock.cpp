// The calling thread's StageClock (see stage_clock.h).
#include "tessera/data/stage_clock.h"

namespace tessera::data {

namespace {
thread_local StageClock* t_clock = nullptr;
}  // namespace

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::Read: return "read";
    case Stage::Decode: return "decode";
    case Stage::Resample: return "resample";
    case Stage::Augment: return "augment";
    case Stage::Normalize: return "normalize";
  }
  return "?";
}

StageClock* set_thread_stage_clock(StageClock* clock) {
  StageClock* previous = t_clock;
  t_clock = clock;
  return previous;
}

StageClock* thread_stage_clock() { return t_clock; }

}  // namespace tessera::data
