// Learning-rate schedules as pure functions of the global update count, so a resumed run needs no
// scheduler state: lr_at(k) is the learning rate of optimizer update k (0-based).
//
// The formulas are timm's (timm/scheduler/cosine_lr.py, step_lr.py, scheduler_factory.py, read at
// timm 1.0.31) stepped per update (--sched-on-updates, t_in_epochs=False): the trainer passes
// every length in updates (epochs × updates per epoch, as timm's factory multiplies them) and
// lr_at(k) equals the lr timm sets by step_update(num_updates=k), which is the lr timm's update
// k + 1 runs with. (timm also uses warmup_lr for update 0 when warm-up is on, as lr_at(0) does.)
//
//   warm-up (k < warmup_steps):   warmup_lr + k·(lr − warmup_lr)/warmup_steps
//   then, with t = k (or k − warmup_steps when warmup_prefix):
//   cosine:    min_lr + ½(lr − min_lr)(1 + cos(π·t/total_steps)) while t < total_steps, then min_lr
//              (one cycle; the warm-up lies inside the window unless warmup_prefix)
//   step:      lr · decay_rate^⌊t/decay_steps⌋
//   constant:  lr (timm's 'constant' = step with decay_rate 1)
#pragma once
#include <cstdint>
#include <string>

namespace tessera::train {

enum class ScheduleKind { Cosine, Step, Constant };

struct ScheduleOptions {
  double lr = 0.0;             // the base (peak) learning rate
  int64_t total_steps = 0;     // cosine: t_initial, the window length (--epochs × updates/epoch)
  int64_t warmup_steps = 0;    // --warmup-epochs × updates/epoch
  double warmup_lr = 1e-5;     // --warmup-lr: the lr of update 0
  double min_lr = 0.0;         // --min-lr: the cosine floor
  bool warmup_prefix = false;  // --warmup-prefix: the cosine/step clock starts after the warm-up
  int64_t decay_steps = 0;     // step: the decay interval (--decay-epochs × updates/epoch)
  double decay_rate = 0.1;     // step: --decay-rate
};

class LrScheduler {
 public:
  // Checks the options the kind uses (lengths > 0, rates finite and >= 0).
  LrScheduler(ScheduleKind kind, const ScheduleOptions& options);
  // The learning rate of update `step` (>= 0).
  double lr_at(int64_t step) const;
  ScheduleKind kind() const { return kind_; }
  const ScheduleOptions& options() const { return opt_; }

 private:
  ScheduleKind kind_;
  ScheduleOptions opt_;
};

// By timm's --sched name: "cosine", "step", "constant" (or "const"). Unknown names are an error
// listing the valid ones.
LrScheduler create_scheduler(const std::string& name, const ScheduleOptions& options);

}  // namespace tessera::train
