#include "registry/diff.h"

#include <map>
#include <set>

#include "base/config.h"
#include "registry/tensor_math.h"

namespace reel::registry {
namespace {

using Flat = std::map<std::string, std::string>;

std::vector<KeyChange> Compare(const Flat& a, const Flat& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<KeyChange> out;
  for (const std::string& k : keys) {
    auto ia = a.find(k), ib = b.find(k);
    std::optional<std::string> from, to;
    if (ia != a.end()) from = ia->second;
    if (ib != b.end()) to = ib->second;
    if (from != to) out.push_back({k, from, to});
  }
  return out;
}

// Scalars of a JSON object by dotted key; arrays are left out (a confusion matrix is not a
// metric to compare key by key), per-class arrays are keyed by class name.
void FlattenJson(const nlohmann::json& j, const std::string& key, Flat* out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) FlattenJson(v, key.empty() ? k : key + "." + k, out);
  } else if (!j.is_array()) {
    (*out)[key] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

Flat FlattenMetrics(const nlohmann::json& metrics) {
  Flat out;
  FlattenJson(metrics, "", &out);
  const auto names = metrics.find("class_names");
  const auto per_class = metrics.find("per_class");
  if (names != metrics.end() && per_class != metrics.end() && names->is_array() &&
      per_class->is_array() && names->size() == per_class->size()) {
    for (size_t i = 0; i < names->size(); ++i) {
      if ((*names)[i].is_string()) {
        out["per_class." + (*names)[i].get<std::string>()] = (*per_class)[i].dump();
      }
    }
  }
  return out;
}

Result<Flat> FlattenConfig(const std::string& text, const VersionId& id) {
  if (text.empty()) return Flat{};
  Result<ConfigNode> node = ConfigNode::LoadString(text, id.ToString() + " config");
  if (!node.ok()) return DataLossError(node.status().message());
  return node->Flatten();
}

std::string Describe(const TensorEntry& t) {
  std::string s = t.dtype + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "]";
}

Result<TensorChange> CompareTensor(const std::string& name, const TensorEntry* a,
                                   const TensorEntry* b, const models::SafetensorsFile& pa,
                                   const models::SafetensorsFile& pb) {
  using Kind = TensorChange::Kind;
  if (a == nullptr) return TensorChange{name, Kind::kAdded, 0, "", Describe(*b)};
  if (b == nullptr) return TensorChange{name, Kind::kRemoved, 0, Describe(*a), ""};
  if (a->dtype != b->dtype || a->shape != b->shape) {
    return TensorChange{name, Kind::kShapeChanged, 0, Describe(*a), Describe(*b)};
  }
  if (a->id == b->id) return TensorChange{name, Kind::kUnchanged, 0, "", ""};
  REEL_ASSIGN_OR_RETURN(std::vector<double> va, ToDoubles(pa.tensors.at(name)));
  REEL_ASSIGN_OR_RETURN(std::vector<double> vb, ToDoubles(pb.tensors.at(name)));
  return TensorChange{name, Kind::kChanged, RelativeL2(va, vb), "", ""};
}

// Only the tensors that differ by content, pulled from the store.
Result<models::SafetensorsFile> PullChanged(Registry& registry, const VersionInfo& v,
                                            const WeightManifest& other) {
  VersionInfo subset = v;
  subset.weights.tensors.clear();
  for (const auto& [name, t] : v.weights.tensors) {
    auto it = other.tensors.find(name);
    if (it != other.tensors.end() && it->second.id != t.id && it->second.dtype == t.dtype &&
        it->second.shape == t.shape) {
      subset.weights.tensors[name] = t;
    }
  }
  return registry.PullWeights(subset);
}

}  // namespace

std::string_view TensorChangeName(TensorChange::Kind kind) {
  switch (kind) {
    case TensorChange::Kind::kUnchanged:
      return "unchanged";
    case TensorChange::Kind::kChanged:
      return "changed";
    case TensorChange::Kind::kAdded:
      return "added";
    case TensorChange::Kind::kRemoved:
      return "removed";
    case TensorChange::Kind::kShapeChanged:
      return "shape-changed";
  }
  return "?";
}

int VersionDiff::Count(TensorChange::Kind kind) const {
  int n = 0;
  for (const TensorChange& t : tensors) n += t.kind == kind;
  return n;
}

Result<VersionDiff> DiffVersions(Registry& registry, const VersionInfo& a, const VersionInfo& b) {
  VersionDiff d{a.id, b.id, {}, {}, {}, {}};
  Flat arch_a, arch_b;
  FlattenJson(a.architecture, "", &arch_a);
  FlattenJson(b.architecture, "", &arch_b);
  d.architecture = Compare(arch_a, arch_b);
  REEL_ASSIGN_OR_RETURN(Flat config_a, FlattenConfig(a.config, a.id));
  REEL_ASSIGN_OR_RETURN(Flat config_b, FlattenConfig(b.config, b.id));
  d.config = Compare(config_a, config_b);
  d.metrics = Compare(FlattenMetrics(a.metrics), FlattenMetrics(b.metrics));
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile pa, PullChanged(registry, a, b.weights));
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile pb, PullChanged(registry, b, a.weights));
  std::set<std::string> names;
  for (const auto& [n, t] : a.weights.tensors) names.insert(n);
  for (const auto& [n, t] : b.weights.tensors) names.insert(n);
  for (const std::string& n : names) {
    auto ia = a.weights.tensors.find(n), ib = b.weights.tensors.find(n);
    REEL_ASSIGN_OR_RETURN(
        TensorChange c,
        CompareTensor(n, ia == a.weights.tensors.end() ? nullptr : &ia->second,
                      ib == b.weights.tensors.end() ? nullptr : &ib->second, pa, pb));
    d.tensors.push_back(std::move(c));
  }
  return d;
}

nlohmann::json VersionDiff::ToJson() const {
  auto changes = [](const std::vector<KeyChange>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const KeyChange& c : list) {
      out.push_back({{"key", c.key},
                     {"from", c.from ? nlohmann::json(*c.from) : nlohmann::json()},
                     {"to", c.to ? nlohmann::json(*c.to) : nlohmann::json()}});
    }
    return out;
  };
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorChange& t : this->tensors) {
    nlohmann::json j = {{"name", t.name}, {"change", std::string(TensorChangeName(t.kind))}};
    if (t.kind == TensorChange::Kind::kChanged) j["relative_l2"] = t.relative_l2;
    if (!t.from.empty()) j["from"] = t.from;
    if (!t.to.empty()) j["to"] = t.to;
    tensors.push_back(std::move(j));
  }
  return {{"a", a.ToString()},
          {"b", b.ToString()},
          {"architecture", changes(architecture)},
          {"config", changes(config)},
          {"metrics", changes(metrics)},
          {"tensors", tensors}};
}

}  // namespace reel::registry
