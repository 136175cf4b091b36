#include "parallel/partition.h"

#include <algorithm>
#include <limits>

namespace reel::parallel {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

struct Prefix {
  std::vector<double> seconds;
  std::vector<int64_t> parameters, activations;
  explicit Prefix(const std::vector<UnitCost>& units)
      : seconds(units.size() + 1, 0),
        parameters(units.size() + 1, 0),
        activations(units.size() + 1, 0) {
    for (size_t i = 0; i < units.size(); ++i) {
      seconds[i + 1] = seconds[i] + units[i].seconds;
      parameters[i + 1] = parameters[i] + units[i].parameter_bytes;
      activations[i + 1] = activations[i] + units[i].activation_bytes;
    }
  }
};

int InFlight(const PartitionOptions& o, int stage) {
  return o.in_flight.empty() ? 1 : o.in_flight.at(static_cast<size_t>(stage));
}

int64_t StageMemory(const Prefix& p, const PartitionOptions& o, int stage, int begin, int end) {
  return (p.parameters[end] - p.parameters[begin]) * o.state_copies +
         (p.activations[end] - p.activations[begin]) * InFlight(o, stage);
}

Status Check(const std::vector<UnitCost>& units, int stages, const PartitionOptions& o) {
  if (stages < 1 || static_cast<size_t>(stages) > units.size()) {
    return InvalidArgumentError("cannot cut " + std::to_string(units.size()) + " units into " +
                                std::to_string(stages) + " stages");
  }
  if (!o.in_flight.empty() && o.in_flight.size() != static_cast<size_t>(stages)) {
    return InvalidArgumentError("in_flight has " + std::to_string(o.in_flight.size()) +
                                " entries for " + std::to_string(stages) + " stages");
  }
  for (const UnitCost& u : units) {
    if (u.seconds < 0 || u.parameter_bytes < 0 || u.activation_bytes < 0) {
      return InvalidArgumentError("unit " + u.name + " has a negative cost");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<StagePlan> BalanceStages(const std::vector<UnitCost>& units, int stages,
                                const PartitionOptions& options) {
  REEL_RETURN_IF_ERROR(Check(units, stages, options));
  const int n = static_cast<int>(units.size());
  const Prefix p(units);
  auto fits = [&](int stage, int begin, int end) {
    return options.memory_limit <= 0 ||
           StageMemory(p, options, stage, begin, end) <= options.memory_limit;
  };
  // best[s][i]: the slowest stage's time when stages 0..s-1 run units [0, i); from[s][i]: the
  // cut before stage s-1 that achieves it.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInfinite));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int i = s; i <= n - (stages - s); ++i) {
      for (int j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == kInfinite || !fits(s - 1, j, i)) continue;
        const double slowest = std::max(best[s - 1][j], p.seconds[i] - p.seconds[j]);
        if (slowest < best[s][i]) {
          best[s][i] = slowest;
          from[s][i] = j;
        }
      }
    }
  }
  if (best[stages][n] == kInfinite) {
    int64_t least = 0;  // no split can do better than its largest single unit
    for (int i = 0; i < n; ++i) least = std::max(least, StageMemory(p, options, 0, i, i + 1));
    return InvalidArgumentError(
        "no split into " + std::to_string(stages) + " stages fits " +
        std::to_string(options.memory_limit) + " bytes per worker (a stage needs at least " +
        std::to_string(least) + "): use more stages or smaller micro-batches");
  }
  StagePlan plan;
  plan.cuts.assign(stages + 1, n);
  for (int s = stages; s > 0; --s) plan.cuts[s - 1] = from[s][plan.cuts[s]];
  for (int s = 0; s < stages; ++s) {
    plan.seconds.push_back(p.seconds[plan.cuts[s + 1]] - p.seconds[plan.cuts[s]]);
    plan.memory_bytes.push_back(StageMemory(p, options, s, plan.cuts[s], plan.cuts[s + 1]));
  }
  plan.slowest_seconds = best[stages][n];
  return plan;
}

}  // namespace reel::parallel
