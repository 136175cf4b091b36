// Where to cut a model into pipeline stages: its chain of units (layers, residual blocks) with
// their measured costs, split into S contiguous stages so that the slowest stage, which paces the
// whole pipeline, is as fast as it can be, among the splits whose every stage fits the worker's
// memory.
//
// A stage's memory: its parameters times `state_copies` (weights, gradients and the optimiser's
// state: 4 for Adam's two moments) plus the activations it keeps for backward, one set per
// micro-batch in flight on it (`in_flight[s]`: M for GPipe, S-s for 1F1B).
//
// Errors: InvalidArgument for more stages than units, costs that are negative, or no split that
// fits (naming the least memory one would need). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::parallel {

struct UnitCost {
  std::string name;
  double seconds = 0;  // forward and backward of one micro-batch
  int64_t parameter_bytes = 0;
  int64_t activation_bytes = 0;  // kept for backward, per micro-batch
};

struct StagePlan {
  std::vector<int> cuts;  // S+1 unit indices: stage s runs units [cuts[s], cuts[s+1])
  std::vector<double> seconds;
  std::vector<int64_t> memory_bytes;
  double slowest_seconds = 0;
};

struct PartitionOptions {
  int64_t memory_limit = 0;  // per worker; 0: no limit
  int state_copies = 4;
  std::vector<int> in_flight;  // per stage; empty: 1 each
};

Result<StagePlan> BalanceStages(const std::vector<UnitCost>& units, int stages,
                                const PartitionOptions& options = {});

}  // namespace reel::parallel
