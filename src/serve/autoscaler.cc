#include "serve/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace reel::serve {

Status AutoscaleOptions::Validate() const {
  if (min_replicas < 1 || max_replicas < min_replicas) {
    return InvalidArgumentError("replicas " + std::to_string(min_replicas) + ":" +
                                std::to_string(max_replicas) +
                                ": want MIN:MAX with 1 <= MIN <= MAX");
  }
  if (!(target_in_flight > 0)) {
    return InvalidArgumentError("the target of requests in flight per replica must be > 0");
  }
  if (target_latency_ms < 0) return InvalidArgumentError("the target latency must be >= 0");
  if (tolerance < 0 || tolerance >= 1) return InvalidArgumentError("the tolerance is 0 to <1");
  if (scale_down_window < Clock::Duration::zero()) {
    return InvalidArgumentError("the scale-down window must be >= 0");
  }
  return Status::Ok();
}

int Autoscaler::Raw(int current, const LoadSample& load) const {
  // One metric's ratio to its target, or 1 (no change) when within the tolerance.
  const auto ratio = [&](double value, double target) {
    const double r = value / target;
    return std::abs(r - 1) <= options_.tolerance ? 1.0 : r;
  };
  double wanted = ratio(load.in_flight_per_replica, options_.target_in_flight);
  if (options_.target_latency_ms > 0 && load.latency_ms > 0) {
    wanted = std::max(wanted, ratio(load.latency_ms, options_.target_latency_ms));
  }
  const int desired = wanted == 1.0 ? current : static_cast<int>(std::ceil(current * wanted));
  return std::clamp(desired, options_.min_replicas, options_.max_replicas);
}

int Autoscaler::Recommend(Clock::TimePoint now, int current, const LoadSample& load) {
  const int raw = Raw(current, load);
  recent_.emplace_back(now, raw);
  while (!recent_.empty() && recent_.front().first < now - options_.scale_down_window) {
    recent_.pop_front();
  }
  if (raw >= current) return raw;  // up (or steady) at once
  int highest = raw;
  for (const auto& [when, n] : recent_) highest = std::max(highest, n);
  return std::min(highest, current);  // down only as far as the whole window allows
}

}  // namespace reel::serve
