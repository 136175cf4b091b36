#include "registry/merge.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include "base/check.h"
#include "registry/tensor_math.h"

namespace reel::registry {
namespace {

// One tensor on each side; null where that side has no such tensor.
struct Sides {
  const TensorEntry* base = nullptr;
  const TensorEntry* ours = nullptr;
  const TensorEntry* theirs = nullptr;
};

enum class Take { kOurs, kTheirs, kDrop, kConflict };

bool Same(const TensorEntry* a, const TensorEntry* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return a->id == b->id && a->dtype == b->dtype && a->shape == b->shape;
}

bool SameLayout(const TensorEntry* a, const TensorEntry* b) {
  return a != nullptr && b != nullptr && a->dtype == b->dtype && a->shape == b->shape;
}

// Three-way: a side that did not change from the base gives way to the one that
// did.
Take Decide(const Sides& s) {
  if (Same(s.ours, s.theirs)) return s.ours != nullptr ? Take::kOurs : Take::kDrop;
  if (Same(s.ours, s.base)) return s.theirs != nullptr ? Take::kTheirs : Take::kDrop;
  if (Same(s.theirs, s.base)) return s.ours != nullptr ? Take::kOurs : Take::kDrop;
  return Take::kConflict;
}

const TensorEntry* Find(const WeightManifest* m, const std::string& name) {
  if (m == nullptr) return nullptr;
  auto it = m->tensors.find(name);
  return it == m->tensors.end() ? nullptr : &it->second;
}

std::set<std::string> Names(std::initializer_list<const WeightManifest*> manifests) {
  std::set<std::string> names;
  for (const WeightManifest* m : manifests) {
    if (m == nullptr) continue;
    for (const auto& [name, t] : m->tensors) names.insert(name);
  }
  return names;
}

// Keeps the `density` fraction of largest magnitudes (at least one), zeroes the
// rest.
void Trim(std::vector<double>* delta, double density) {
  const size_t n = delta->size();
  if (n == 0 || density >= 1) return;
  const size_t keep = std::max<size_t>(1, static_cast<size_t>(std::ceil(density * n)));
  std::vector<double> magnitudes(n);
  for (size_t i = 0; i < n; ++i) magnitudes[i] = std::fabs((*delta)[i]);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + (n - keep), magnitudes.end());
  const double threshold = magnitudes[n - keep];
  size_t kept = 0;  // ties at the threshold: keep only as many as asked
  for (double& d : *delta) {
    if (std::fabs(d) > threshold) ++kept;
  }
  for (double& d : *delta) {
    if (std::fabs(d) < threshold || (std::fabs(d) == threshold && kept >= keep)) {
      d = 0;
    } else if (std::fabs(d) == threshold) {
      ++kept;
    }
  }
}

std::vector<double> Ties(const std::vector<double>& b, std::vector<double> d_o,
                         std::vector<double> d_t, const MergeOptions& o) {
  Trim(&d_o, o.density);
  Trim(&d_t, o.density);
  std::vector<double> out(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const double elected = d_o[i] + d_t[i];
    if (elected == 0) {  // no side wins the vote: the weight stays
      out[i] = b[i];
      continue;
    }
    double sum = 0;
    int count = 0;
    for (double d : {d_o[i], d_t[i]}) {
      if (d != 0 && (d > 0) == (elected > 0)) sum += d, ++count;
    }
    out[i] = b[i] + o.scale * (count > 0 ? sum / count : 0.0);
  }
  return out;
}

Result<std::vector<double>> Resolve(MergeStrategy strategy, const MergeOptions& o,
                                    const std::vector<double>* b, const std::vector<double>& x,
                                    const std::vector<double>& y) {
  std::vector<double> out(x.size());
  if (strategy == MergeStrategy::kAverage) {
    for (size_t i = 0; i < x.size(); ++i) out[i] = (1 - o.alpha) * x[i] + o.alpha * y[i];
    return out;
  }
  if (b == nullptr) {
    return InvalidArgumentError("strategy " + std::string(MergeStrategyName(strategy)) +
                                " needs the common ancestor's tensor");
  }
  std::vector<double> d_x(x.size()), d_y(x.size());
  for (size_t i = 0; i < x.size(); ++i) d_x[i] = x[i] - (*b)[i], d_y[i] = y[i] - (*b)[i];
  if (strategy == MergeStrategy::kTies) return Ties(*b, std::move(d_x), std::move(d_y), o);
  for (size_t i = 0; i < x.size(); ++i) out[i] = (*b)[i] + o.scale * (d_x[i] + d_y[i]);
  return out;
}

// The pulled tensors of the three sides, by name.
struct Pulled {
  models::SafetensorsFile base, ours, theirs;
};

Result<models::TensorBytes> ResolveConflict(const std::string& name, const Sides& s,
                                            const Pulled& p, const MergeOptions& o) {
  const MergeStrategy strategy = o.strategy;
  REEL_CHECK(strategy != MergeStrategy::kOurs && strategy != MergeStrategy::kTheirs &&
             strategy != MergeStrategy::kNone)
      << "ours, theirs and none are settled before any tensor is resolved";
  if (!SameLayout(s.ours, s.theirs)) {
    return InvalidArgumentError("tensor '" + name + "' was removed or reshaped on one side and " +
                                "changed on the other: resolve it with --strategy ours|theirs");
  }
  const bool with_base = SameLayout(s.base, s.ours);
  REEL_ASSIGN_OR_RETURN(std::vector<double> x, ToDoubles(p.ours.tensors.at(name)));
  REEL_ASSIGN_OR_RETURN(std::vector<double> y, ToDoubles(p.theirs.tensors.at(name)));
  std::vector<double> b;
  if (with_base) {
    REEL_ASSIGN_OR_RETURN(b, ToDoubles(p.base.tensors.at(name)));
  }
  Result<std::vector<double>> merged = Resolve(strategy, o, with_base ? &b : nullptr, x, y);
  if (!merged.ok())
    return InvalidArgumentError("tensor '" + name + "': " + merged.status().message());
  return FromDoubles(*merged, s.ours->dtype, s.ours->shape);
}

Status CheckArchitectures(const VersionInfo& a, const VersionInfo& b) {
  if (a.architecture == b.architecture) return Status::Ok();
  return InvalidArgumentError("cannot merge across architectures: " + a.id.ToString() + " is " +
                              a.architecture.dump() + ", " + b.id.ToString() + " is " +
                              b.architecture.dump());
}

Status CheckOptions(const MergeOptions& o) {
  if (!(o.alpha >= 0 && o.alpha <= 1)) return InvalidArgumentError("alpha must be in [0, 1]");
  if (!(o.density > 0 && o.density <= 1)) return InvalidArgumentError("density must be in (0, 1]");
  if (!std::isfinite(o.scale)) return InvalidArgumentError("scale must be a finite number");
  return Status::Ok();
}

std::string ConflictList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 10; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 10) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace

Result<MergeStrategy> ParseMergeStrategy(std::string_view name) {
  for (MergeStrategy s :
       {MergeStrategy::kNone, MergeStrategy::kOurs, MergeStrategy::kTheirs, MergeStrategy::kAverage,
        MergeStrategy::kTaskArithmetic, MergeStrategy::kTies}) {
    if (MergeStrategyName(s) == name) return s;
  }
  return InvalidArgumentError("unknown merge strategy '" + std::string(name) +
                              "' (expected none, ours, theirs, average, task-arithmetic or ties)");
}

std::string_view MergeStrategyName(MergeStrategy s) {
  switch (s) {
    case MergeStrategy::kNone:
      return "none";
    case MergeStrategy::kOurs:
      return "ours";
    case MergeStrategy::kTheirs:
      return "theirs";
    case MergeStrategy::kAverage:
      return "average";
    case MergeStrategy::kTaskArithmetic:
      return "task-arithmetic";
    case MergeStrategy::kTies:
      return "ties";
  }
  return "?";
}

Result<std::optional<VersionId>> LowestCommonAncestor(Registry& registry, const VersionId& a,
                                                      const VersionId& b) {
  using Key = std::pair<std::string, int64_t>;
  auto distances = [&](const VersionId& start) -> Result<std::map<Key, int>> {
    std::map<Key, int> dist{{{start.model, start.version}, 0}};
    std::deque<VersionId> queue{start};
    while (!queue.empty()) {
      const VersionId id = queue.front();
      queue.pop_front();
      const int d = dist[{id.model, id.version}];
      REEL_ASSIGN_OR_RETURN(std::vector<VersionId> parents, registry.Parents(id));
      for (const VersionId& p : parents) {
        if (dist.emplace(Key{p.model, p.version}, d + 1).second) queue.push_back(p);
      }
    }
    return dist;
  };
  REEL_ASSIGN_OR_RETURN(auto from_a, distances(a));
  REEL_ASSIGN_OR_RETURN(auto from_b, distances(b));
  std::optional<VersionId> best;
  int best_steps = 0;
  for (const auto& [key, da] : from_a) {
    auto it = from_b.find(key);
    if (it == from_b.end()) continue;
    const int steps = da + it->second;
    if (!best || steps < best_steps || (steps == best_steps && key.second > best->version)) {
      best = VersionId{key.first, key.second};
      best_steps = steps;
    }
  }
  return best;
}

Result<MergeOutcome> MergeVersions(Registry& registry, const VersionInfo& ours,
                                   const VersionInfo& theirs, const MergeOptions& options) {
  REEL_RETURN_IF_ERROR(CheckOptions(options));
  REEL_RETURN_IF_ERROR(CheckArchitectures(ours, theirs));
  REEL_ASSIGN_OR_RETURN(std::optional<VersionId> lca,
                        LowestCommonAncestor(registry, ours.id, theirs.id));
  std::optional<VersionInfo> base;
  if (lca) {
    REEL_ASSIGN_OR_RETURN(base, registry.Get(*lca));
  }
  const WeightManifest* bm = base ? &base->weights : nullptr;
  // Decide every tensor first, so that a refusal comes before any pull or
  // arithmetic.
  std::map<std::string, Take> plan;
  std::vector<std::string> conflicts;
  for (const std::string& name : Names({bm, &ours.weights, &theirs.weights})) {
    Sides s{Find(bm, name), Find(&ours.weights, name), Find(&theirs.weights, name)};
    Take take = Decide(s);
    if (take == Take::kConflict) {
      conflicts.push_back(name);
      if (options.strategy == MergeStrategy::kOurs) take = s.ours ? Take::kOurs : Take::kDrop;
      if (options.strategy == MergeStrategy::kTheirs) take = s.theirs ? Take::kTheirs : Take::kDrop;
    }
    plan[name] = take;
  }
  if (!conflicts.empty() && options.strategy == MergeStrategy::kNone) {
    return FailedPreconditionError(std::to_string(conflicts.size()) +
                                   " tensor(s) changed on both sides: " + ConflictList(conflicts) +
                                   "; choose --strategy ours, theirs, average, task-arithmetic "
                                   "or ties");
  }
  Pulled p;
  REEL_ASSIGN_OR_RETURN(p.ours, registry.PullWeights(ours));
  REEL_ASSIGN_OR_RETURN(p.theirs, registry.PullWeights(theirs));
  if (base) {
    REEL_ASSIGN_OR_RETURN(p.base, registry.PullWeights(*base));
  }
  MergeOutcome out;
  out.base = lca;
  out.conflicts = static_cast<int>(conflicts.size());
  out.weights.metadata = p.ours.metadata;
  std::map<std::string, int> counts;
  for (const auto& [name, take] : plan) {
    Sides s{Find(bm, name), Find(&ours.weights, name), Find(&theirs.weights, name)};
    if (take == Take::kOurs) out.weights.tensors[name] = p.ours.tensors.at(name);
    if (take == Take::kTheirs) out.weights.tensors[name] = p.theirs.tensors.at(name);
    if (take == Take::kConflict) {
      REEL_ASSIGN_OR_RETURN(out.weights.tensors[name], ResolveConflict(name, s, p, options));
    }
    ++counts[take == Take::kOurs     ? "ours"
             : take == Take::kTheirs ? "theirs"
             : take == Take::kDrop   ? "dropped"
                                     : "resolved"];
  }
  out.recipe = {{"op", "merge"},
                {"ours", ours.id.ToString()},
                {"theirs", theirs.id.ToString()},
                {"base", lca ? nlohmann::json(lca->ToString()) : nlohmann::json()},
                {"strategy", std::string(MergeStrategyName(options.strategy))},
                {"alpha", options.alpha},
                {"scale", options.scale},
                {"density", options.density},
                {"conflicts", out.conflicts},
                {"tensors", counts}};
  return out;
}

Result<MergeOutcome> RebaseVersion(Registry& registry, const VersionInfo& tip,
                                   const VersionInfo& old_base, const VersionInfo& new_base) {
  REEL_RETURN_IF_ERROR(CheckArchitectures(tip, new_base));
  Pulled p;  // base: the old base; ours: the tip; theirs: the new base
  REEL_ASSIGN_OR_RETURN(p.base, registry.PullWeights(old_base));
  REEL_ASSIGN_OR_RETURN(p.ours, registry.PullWeights(tip));
  REEL_ASSIGN_OR_RETURN(p.theirs, registry.PullWeights(new_base));
  MergeOutcome out;
  out.base = old_base.id;
  out.weights.metadata = p.ours.metadata;
  MergeOptions replay;
  replay.strategy = MergeStrategy::kTaskArithmetic;  // new + (tip - old) = old + d_tip + d_new
  std::map<std::string, int> counts;
  for (const std::string& name : Names({&old_base.weights, &tip.weights, &new_base.weights})) {
    Sides s{Find(&old_base.weights, name), Find(&tip.weights, name), Find(&new_base.weights, name)};
    const Take take = Decide(s);
    if (take == Take::kOurs) out.weights.tensors[name] = p.ours.tensors.at(name);
    if (take == Take::kTheirs) out.weights.tensors[name] = p.theirs.tensors.at(name);
    if (take == Take::kConflict) {
      if (!SameLayout(s.base, s.ours) || !SameLayout(s.ours, s.theirs)) {
        return InvalidArgumentError("rebase: tensor '" + name +
                                    "' does not have one dtype and shape in the tip, the old "
                                    "base and the new base");
      }
      REEL_ASSIGN_OR_RETURN(out.weights.tensors[name], ResolveConflict(name, s, p, replay));
    }
    ++counts[take == Take::kOurs     ? "tip"
             : take == Take::kTheirs ? "new_base"
             : take == Take::kDrop   ? "dropped"
                                     : "replayed"];
  }
  out.recipe = {{"op", "rebase"},
                {"tip", tip.id.ToString()},
                {"old_base", old_base.id.ToString()},
                {"new_base", new_base.id.ToString()},
                {"tensors", counts}};
  return out;
}

}  // namespace reel::registry
