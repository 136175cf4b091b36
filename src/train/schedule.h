// Learning-rate schedules for the trainer: linear warmup from 0, then cosine decay to a floor.
// Pure functions of the step, so a resumed run continues the schedule exactly.
// Thread-safety: plain values.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace reel::train {

struct ScheduleOptions {
  double base_lr = 0.1;
  int64_t warmup_steps = 0;  // lr rises linearly from base_lr / warmup_steps to base_lr
  int64_t total_steps = 1;   // steps of the whole run, warmup included
  double min_lr = 0.0;       // floor the cosine reaches at total_steps
};

// InvalidArgument for a non-positive base_lr or total_steps, negative warmup or min_lr,
// warmup_steps > total_steps, or min_lr > base_lr.
Status ValidateSchedule(const ScheduleOptions& options);

// The learning rate for optimiser step `step` (0-based). Past total_steps it stays at min_lr.
double LearningRate(const ScheduleOptions& options, int64_t step);

}  // namespace reel::train
