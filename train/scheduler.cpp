// Learning-rate schedules (formulas and their timm sources in train/scheduler.h). The arithmetic
// follows timm's expression order so that values agree with timm to the last bit.
#include "tessera/train/scheduler.h"

#include <cmath>

#include "tessera/core/error.h"

namespace tessera::train {

namespace {

void check_rate(const char* what, double v) {
  TS_CHECK(std::isfinite(v) && v >= 0.0, "scheduler: ", what, " must be finite and >= 0, got ", v);
}

}  // namespace

LrScheduler::LrScheduler(ScheduleKind kind, const ScheduleOptions& options) : kind_(kind), opt_(options) {
  check_rate("lr", opt_.lr);
  check_rate("warmup_lr", opt_.warmup_lr);
  check_rate("min_lr", opt_.min_lr);
  TS_CHECK(opt_.warmup_steps >= 0, "scheduler: warmup_steps must be >= 0, got ", opt_.warmup_steps);
  if (kind_ == ScheduleKind::Cosine)
    TS_CHECK(opt_.total_steps > 0, "scheduler: cosine needs total_steps > 0 (epochs × updates per epoch), got ",
             opt_.total_steps);
  if (kind_ == ScheduleKind::Step) {
    TS_CHECK(opt_.decay_steps > 0, "scheduler: step needs decay_steps > 0, got ", opt_.decay_steps);
    check_rate("decay_rate", opt_.decay_rate);
  }
}

double LrScheduler::lr_at(int64_t step) const {
  TS_CHECK(step >= 0, "scheduler: lr_at: step must be >= 0, got ", step);
  const ScheduleOptions& o = opt_;
  if (step < o.warmup_steps) {
    const double per_step = (o.lr - o.warmup_lr) / static_cast<double>(o.warmup_steps);
    return o.warmup_lr + static_cast<double>(step) * per_step;
  }
  const int64_t t = o.warmup_prefix ? step - o.warmup_steps : step;
  switch (kind_) {
    case ScheduleKind::Cosine: {
      if (t >= o.total_steps) return o.min_lr;  // past the single cycle
      const double pi = 3.14159265358979323846;
      return o.min_lr +
             0.5 * (o.lr - o.min_lr) * (1 + std::cos(pi * static_cast<double>(t) / static_cast<double>(o.total_steps)));
    }
    case ScheduleKind::Step: return o.lr * std::pow(o.decay_rate, static_cast<double>(t / o.decay_steps));
    case ScheduleKind::Constant: return o.lr;
  }
  return o.lr;
}

LrScheduler create_scheduler(const std::string& name, const ScheduleOptions& options) {
  if (name == "cosine") return LrScheduler(ScheduleKind::Cosine, options);
  if (name == "step") return LrScheduler(ScheduleKind::Step, options);
  if (name == "constant" || name == "const") return LrScheduler(ScheduleKind::Constant, options);
  throw Error("create_scheduler: unknown schedule '" + name + "'; valid names: cosine, step, constant (const)");
}

}  // namespace tessera::train
