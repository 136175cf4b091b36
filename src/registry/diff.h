// What changed between two versions: architecture and config keys, metrics, and per tensor
// (unchanged, changed with its relative L2 distance, added, removed, shape or dtype changed).
// Tensors with the same content identity are unchanged without reading their bytes; only
// changed ones are pulled and compared.
// Thread-safety: pure functions over a Registry (one thread at a time, as the Registry).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "registry/registry.h"

namespace reel::registry {

struct KeyChange {
  std::string key;
  std::optional<std::string> from, to;  // nullopt: absent on that side
};

struct TensorChange {
  enum class Kind { kUnchanged, kChanged, kAdded, kRemoved, kShapeChanged };
  std::string name;
  Kind kind = Kind::kUnchanged;
  double relative_l2 = 0;  // kChanged: ||b - a|| / ||a||
  std::string from, to;    // kShapeChanged: "F32[16,3]"; kAdded/kRemoved: the side present
};

struct VersionDiff {
  VersionId a, b;
  std::vector<KeyChange> architecture, config, metrics;
  std::vector<TensorChange> tensors;  // every tensor of either side, by name
  int Count(TensorChange::Kind kind) const;
  nlohmann::json ToJson() const;
};

std::string_view TensorChangeName(TensorChange::Kind kind);

// Errors: the registry's (pulling changed tensors); DataLoss for a stored config that no longer
// parses.
Result<VersionDiff> DiffVersions(Registry& registry, const VersionInfo& a, const VersionInfo& b);

}  // namespace reel::registry
