#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace reel::train {

Status ValidateSchedule(const ScheduleOptions& o) {
  if (!(o.base_lr > 0)) return InvalidArgumentError("schedule: base_lr must be positive");
  if (o.total_steps < 1) return InvalidArgumentError("schedule: total_steps must be at least 1");
  if (o.warmup_steps < 0 || o.warmup_steps > o.total_steps) {
    return InvalidArgumentError("schedule: warmup_steps must be in [0, total_steps]");
  }
  if (o.min_lr < 0 || o.min_lr > o.base_lr) {
    return InvalidArgumentError("schedule: min_lr must be in [0, base_lr]");
  }
  return Status::Ok();
}

double LearningRate(const ScheduleOptions& o, int64_t step) {
  if (step < o.warmup_steps) {
    return o.base_lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  const int64_t decay_steps = o.total_steps - o.warmup_steps;
  if (decay_steps <= 0) return o.base_lr;
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) / decay_steps);
  return o.min_lr + (o.base_lr - o.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace reel::train
