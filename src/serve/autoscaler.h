// How many serving replicas to run, by the Kubernetes HorizontalPodAutoscaler's rule: for each
// metric, desired = ceil(current × value / target), the largest of them wins, clamped to
// [min, max]. No change while every metric is within `tolerance` of its target (HPA: 10%).
// Scaling up acts at once; scaling down takes the highest recommendation of the last
// `scale_down_window` (HPA's stabilisation window), so a brief lull does not remove replicas
// that the next burst needs.
//
// The metrics are per replica: requests in flight (mean concurrency, Little's law) and the mean
// latency of the requests answered in the period.
// Thread-safety: not thread-safe; one caller (the front's scaling loop).
#pragma once

#include <chrono>
#include <deque>
#include <utility>

#include "base/clock.h"
#include "base/status.h"

namespace reel::serve {

struct AutoscaleOptions {
  int min_replicas = 1;
  int max_replicas = 1;
  double target_in_flight = 4;   // requests in flight per replica
  double target_latency_ms = 0;  // mean latency per request; 0: not a metric
  double tolerance = 0.1;
  Clock::Duration scale_down_window = std::chrono::seconds(60);  // HPA's default is 300 s

  Status Validate() const;  // InvalidArgument naming the bad field
};

struct LoadSample {
  double in_flight_per_replica = 0;
  double latency_ms = 0;  // 0 when nothing was answered
};

class Autoscaler {
 public:
  explicit Autoscaler(AutoscaleOptions options) : options_(options) {}

  // The replica count to run from `now` on, given `current` replicas and their load.
  int Recommend(Clock::TimePoint now, int current, const LoadSample& load);

  // The HPA rule alone, without the window: what the load asks for.
  int Raw(int current, const LoadSample& load) const;

  const AutoscaleOptions& options() const { return options_; }

 private:
  AutoscaleOptions options_;
  std::deque<std::pair<Clock::TimePoint, int>> recent_;  // raw recommendations in the window
};

}  // namespace reel::serve
