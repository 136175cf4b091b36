// Merging and rebasing versions, per tensor, as git does for files:
//
// Merge is three-way against the lowest common ancestor of the two versions in
// the version graph (the common ancestor nearest to both). A tensor changed on
// one side only takes that side; changed on both is a conflict unless a
// strategy resolves it:
//   ours, theirs       take that side's tensor
//   average            (1 - alpha) * ours + alpha * theirs
//   task-arithmetic    base + scale * ((ours - base) + (theirs - base))
//   (Ilharco et al.) ties               TIES-merging (Yadav et al.): each
//   side's change trimmed to its largest
//                      `density` fraction by magnitude, a sign elected per
//                      weight by the sum, and the changes that agree with it
//                      averaged: base + scale * merged
// Architectures must be equal and a conflicting tensor must have one dtype and
// shape on every side; otherwise the merge is refused before anything is
// computed.
//
// Rebase replays a change onto a new base: new_base + (tip - old_base) per
// tensor, a tensor the tip did not change taking the new base's and one the new
// base did not change the tip's.
//
// Both return the weights and a recipe (what was done to each tensor) for a new
// version; the caller registers it with its parents. Errors: InvalidArgument
// for different architectures, shapes, or a strategy that needs a common
// ancestor when there is none; FailedPrecondition naming the conflicting
// tensors when no strategy is given; the registry's errors. Thread-safety:
// functions over a Registry (one thread at a time, as the Registry).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/safetensors.h"
#include "registry/registry.h"

namespace reel::registry {

enum class MergeStrategy { kNone, kOurs, kTheirs, kAverage, kTaskArithmetic, kTies };

// "none", "ours", "theirs", "average", "task-arithmetic", "ties";
// InvalidArgument otherwise.
Result<MergeStrategy> ParseMergeStrategy(std::string_view name);
std::string_view MergeStrategyName(MergeStrategy s);

struct MergeOptions {
  MergeStrategy strategy = MergeStrategy::kNone;
  double alpha = 0.5;    // average: the weight of theirs
  double scale = 1.0;    // task-arithmetic and ties: how much of the summed change to add
  double density = 0.2;  // ties: the fraction of each change kept
};

struct MergeOutcome {
  models::SafetensorsFile weights;
  std::optional<VersionId> base;  // the common ancestor (merge) or old base (rebase)
  nlohmann::json recipe;          // {"op": "merge", "strategy": ..., "tensors": {...}, ...}
  int conflicts = 0;              // tensors changed on both sides
};

// The common ancestor of a and b nearest to both (fewest parent steps summed;
// ties broken by the higher version), or nullopt when they share none.
Result<std::optional<VersionId>> LowestCommonAncestor(Registry& registry, const VersionId& a,
                                                      const VersionId& b);

Result<MergeOutcome> MergeVersions(Registry& registry, const VersionInfo& ours,
                                   const VersionInfo& theirs, const MergeOptions& options);

Result<MergeOutcome> RebaseVersion(Registry& registry, const VersionInfo& tip,
                                   const VersionInfo& old_base, const VersionInfo& new_base);

}  // namespace reel::registry
