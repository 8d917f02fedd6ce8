// Where an input pipeline's time goes, stage by stage, for `tessera bench-data`'s split: reading
// the file (and a JPEG's header), decoding, resampling (the crop and resize), augmenting (flips,
// RandAugment or colour jitter, random erasing) and normalising into the tensor. Off unless a
// thread installs a clock: then each stage's scope adds its time to that thread's clock, and other
// threads (a loader's workers) are untouched.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>

namespace tessera::data {

enum class Stage { Read, Decode, Resample, Augment, Normalize };
inline constexpr size_t kStageCount = 5;
const char* stage_name(Stage stage);

struct StageClock {
  std::array<double, kStageCount> seconds{};
};

// Installs `clock` for the calling thread (nullptr: off); returns the one it replaces.
StageClock* set_thread_stage_clock(StageClock* clock);
StageClock* thread_stage_clock();

// Adds the time from construction to destruction to `stage` on the calling thread's clock, if any.
class StageTimer {
 public:
  explicit StageTimer(Stage stage) : clock_(thread_stage_clock()), stage_(stage) {
    if (clock_) start_ = std::chrono::steady_clock::now();
  }
  ~StageTimer() {
    if (clock_)
      clock_->seconds[static_cast<size_t>(stage_)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  StageClock* clock_;
  Stage stage_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tessera::data
