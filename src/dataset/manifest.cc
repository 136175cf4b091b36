#include "dataset/manifest.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/json.h"

namespace reel::dataset {
namespace {

using nlohmann::json;

std::string DatasetUri(const storage::ObjectStore& store, std::string_view root) {
  return root.empty() ? store.uri() : ObjectUri(store, root);
}

}  // namespace

Status Manifest::AddSplit(std::string_view split, const std::vector<ShardStats>& shards) {
  REEL_RETURN_IF_ERROR(ValidateSplitName(split));
  if (splits.count(std::string(split)) != 0) {
    return InvalidArgumentError("split '" + std::string(split) + "' is already in the manifest");
  }
  std::vector<const ShardStats*> ordered;
  ordered.reserve(shards.size());
  for (const ShardStats& s : shards) ordered.push_back(&s);
  std::sort(ordered.begin(), ordered.end(),
            [](const ShardStats* a, const ShardStats* b) { return a->number < b->number; });
  SplitInfo info;
  info.class_counts.assign(classes.size(), 0);
  for (size_t i = 0; i < ordered.size(); ++i) {
    const ShardStats& s = *ordered[i];
    const std::string shard_name = ShardName(s.number);
    if (i > 0 && ordered[i - 1]->number == s.number) {
      return InvalidArgumentError("split '" + std::string(split) + "': " + shard_name +
                                  " given twice");
    }
    if (!s.split.empty() && s.split != split) {
      return InvalidArgumentError(shard_name + " belongs to split '" + s.split + "', not '" +
                                  std::string(split) + "'");
    }
    for (size_t label = 0; label < s.class_counts.size(); ++label) {
      if (s.class_counts[label] == 0) continue;
      if (label >= classes.size()) {
        return InvalidArgumentError("split '" + std::string(split) + "' " + shard_name + " has " +
                                    std::to_string(s.class_counts[label]) + " records of label " +
                                    std::to_string(label) + " but only " +
                                    std::to_string(classes.size()) + " classes are named");
      }
      info.class_counts[label] += s.class_counts[label];
    }
    info.records += s.records;
    info.bytes += s.tar_bytes;
    info.shards.push_back(ShardEntry{shard_name, s.records, s.tar_bytes, s.index_bytes});
  }
  splits.emplace(std::string(split), std::move(info));
  return Status::Ok();
}

int64_t Manifest::feature_dim() const {
  const auto it = features.find("dim");
  if (it == features.end() || !it->is_number_integer()) return 0;
  return it->get<int64_t>();
}

Status Manifest::Validate() const {
  auto bad = [](const std::string& message) {
    return InvalidArgumentError("manifest: " + message);
  };
  if (format_version != kManifestVersion) {
    return bad("format_version " + std::to_string(format_version) + ", this build writes " +
               std::to_string(kManifestVersion));
  }
  if (name.empty()) return bad("empty dataset name");
  if (mode != DatasetMode::kVideo && mode != DatasetMode::kFrames && mode != DatasetMode::kFeatures)
    return bad("unknown mode");
  if (!features.is_object()) return bad("features is not a JSON object");
  if (mode == DatasetMode::kFeatures && feature_dim() < 1)
    return bad("a features dataset needs features.dim, a positive integer");
  if (mode != DatasetMode::kFeatures && !features.empty())
    return bad("features is for mode 'features' only");
  if (classes.empty()) return bad("no classes");
  std::set<std::string_view> seen;
  for (size_t i = 0; i < classes.size(); ++i) {
    if (classes[i].empty()) return bad("class " + std::to_string(i) + " has an empty name");
    if (!seen.insert(classes[i]).second) return bad("class '" + classes[i] + "' appears twice");
  }
  if (!clip_settings.is_object()) return bad("clip_settings is not a JSON object");
  if (splits.empty()) return bad("no splits");
  for (const auto& [split, info] : splits) {
    Status split_ok = ValidateSplitName(split);
    if (!split_ok.ok()) return bad(split_ok.message());
    const std::string where = "split '" + split + "'";
    if (info.class_counts.size() != classes.size()) {
      return bad(where + " has " + std::to_string(info.class_counts.size()) + " class counts for " +
                 std::to_string(classes.size()) + " classes");
    }
    uint64_t by_class = 0, records = 0, bytes = 0;
    for (uint64_t c : info.class_counts) by_class += c;
    std::optional<uint32_t> previous;
    for (const ShardEntry& shard : info.shards) {
      std::optional<uint32_t> number = ParseShardName(shard.name);
      if (!number || shard.name.find('.') != std::string::npos) {
        return bad(where + ": bad shard name '" + shard.name + "'");
      }
      if (previous && *number <= *previous) {
        return bad(where + ": shard " + shard.name + " is out of order or repeated");
      }
      previous = number;
      if (shard.records == 0) return bad(where + ": shard " + shard.name + " has no records");
      if (shard.tar_bytes < 1024 || shard.index_bytes == 0) {
        return bad(where + ": shard " + shard.name + " has impossible sizes");
      }
      records += shard.records;
      bytes += shard.tar_bytes;
    }
    if (by_class != info.records || records != info.records) {
      return bad(where + " counts " + std::to_string(info.records) + " records, its class counts " +
                 std::to_string(by_class) + " and its shards " + std::to_string(records));
    }
    if (bytes != info.bytes) {
      return bad(where + " counts " + std::to_string(info.bytes) + " bytes, its shards " +
                 std::to_string(bytes));
    }
  }
  return Status::Ok();
}

Result<std::string> Manifest::Serialize() const {
  REEL_RETURN_IF_ERROR(Validate());
  try {
    json splits_json = json::object();
    for (const auto& [split, info] : splits) {
      json shards = json::array();
      for (const ShardEntry& s : info.shards) {
        shards.push_back({{"name", s.name},
                          {"records", s.records},
                          {"tar_bytes", s.tar_bytes},
                          {"index_bytes", s.index_bytes}});
      }
      splits_json[split] = {{"records", info.records},
                            {"bytes", info.bytes},
                            {"class_counts", info.class_counts},
                            {"shards", std::move(shards)}};
    }
    json doc = {{"format", kManifestFormat},
                {"format_version", format_version},
                {"name", name},
                {"mode", DatasetModeName(mode)},
                {"classes", classes},
                {"clip_settings", clip_settings},
                {"source_hash", source_hash},
                {"splits", std::move(splits_json)}};
    if (mode == DatasetMode::kFeatures) doc["features"] = features;
    return doc.dump(2) + "\n";
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("manifest cannot be encoded: ") + e.what());
  }
}

Result<Manifest> Manifest::Parse(std::string_view text, std::string_view what) {
  const std::string where(what);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return DataLossError(where + ": malformed manifest: " + e.what());
  }
  auto corrupt = [&](const std::string& message) {
    return DataLossError(where + ": corrupt manifest: " + message);
  };
  JsonFields top(doc, "");
  const std::string format = top.String("format");
  if (top.ok() && format != kManifestFormat) {
    return corrupt("format is '" + format + "', not '" + std::string(kManifestFormat) + "'");
  }
  const int64_t version = top.Int("format_version");
  if (!top.ok()) return corrupt(top.error());
  if (version != kManifestVersion) {
    return FailedPreconditionError(where + ": dataset format version " + std::to_string(version) +
                                   " is not supported; this build reads version " +
                                   std::to_string(kManifestVersion));
  }
  Manifest m;
  m.format_version = static_cast<int>(version);
  m.name = top.String("name");
  const std::string mode = top.String("mode");
  const json& classes = top.Array("classes");
  m.clip_settings = top.Object("clip_settings");
  m.source_hash = top.String("source_hash");
  const json& splits = top.Object("splits");
  if (doc.is_object() && doc.contains("features")) m.features = top.Object("features");
  if (!top.ok()) return corrupt(top.error());
  Result<DatasetMode> parsed_mode = ParseDatasetMode(mode);
  if (!parsed_mode.ok()) return corrupt("mode: " + parsed_mode.status().message());
  m.mode = *parsed_mode;
  for (size_t i = 0; i < classes.size(); ++i) {
    if (!classes[i].is_string()) {
      return corrupt("classes[" + std::to_string(i) + "]: expected a string, got " +
                     classes[i].type_name());
    }
    m.classes.push_back(classes[i].get<std::string>());
  }
  for (const auto& [split, value] : splits.items()) {
    const std::string path = "splits." + split;
    JsonFields fields(value, path);
    SplitInfo info;
    info.records = fields.Uint("records");
    info.bytes = fields.Uint("bytes");
    const json& counts = fields.Array("class_counts");
    const json& shards = fields.Array("shards");
    if (!fields.ok()) return corrupt(fields.error());
    for (size_t i = 0; i < counts.size(); ++i) {
      if (!counts[i].is_number_unsigned()) {
        return corrupt(path + ".class_counts[" + std::to_string(i) +
                       "]: expected an unsigned integer");
      }
      info.class_counts.push_back(counts[i].get<uint64_t>());
    }
    for (size_t i = 0; i < shards.size(); ++i) {
      JsonFields shard(shards[i], path + ".shards[" + std::to_string(i) + "]");
      ShardEntry entry;
      entry.name = shard.String("name");
      entry.records = shard.Uint("records");
      entry.tar_bytes = shard.Uint("tar_bytes");
      entry.index_bytes = shard.Uint("index_bytes");
      if (!shard.ok()) return corrupt(shard.error());
      info.shards.push_back(std::move(entry));
    }
    m.splits.emplace(split, std::move(info));
  }
  Status valid = m.Validate();
  if (!valid.ok()) return corrupt(valid.message());
  return m;
}

Result<Manifest> Manifest::Read(storage::ObjectStore& store, std::string_view root) {
  REEL_ASSIGN_OR_RETURN(std::string normalized, NormalizeRoot(root));
  const std::string key = ManifestKey(normalized);
  Result<std::string> text = store.Get(key);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no Reel dataset at " + DatasetUri(store, normalized) +
                           ": manifest.json missing");
    }
    return text.status().WithContext(ObjectUri(store, key));
  }
  return Parse(*text, ObjectUri(store, key));
}

Status Manifest::Write(storage::ObjectStore& store, std::string_view root,
                       const ManifestWriteOptions& options) const {
  REEL_ASSIGN_OR_RETURN(std::string normalized, NormalizeRoot(root));
  REEL_ASSIGN_OR_RETURN(std::string text, Serialize());
  if (options.verify_shards) {
    for (const auto& [split, info] : splits) {
      const std::string prefix = SplitPrefix(normalized, split);
      Result<std::vector<storage::ObjectInfo>> objects = storage::ListAll(store, prefix);
      if (!objects.ok()) return objects.status().WithContext(ObjectUri(store, prefix));
      std::unordered_map<std::string, uint64_t> sizes;
      for (const storage::ObjectInfo& o : *objects) sizes.emplace(o.key, o.size);
      for (const ShardEntry& shard : info.shards) {
        const std::string base = prefix + shard.name;
        const std::pair<std::string, uint64_t> expected[] = {{base + ".tar", shard.tar_bytes},
                                                             {base + ".idx", shard.index_bytes}};
        for (const auto& [key, size] : expected) {
          auto it = sizes.find(key);
          if (it == sizes.end()) {
            return FailedPreconditionError("cannot publish the manifest: " + ObjectUri(store, key) +
                                           " is missing");
          }
          if (it->second != size) {
            return FailedPreconditionError("cannot publish the manifest: " + ObjectUri(store, key) +
                                           " holds " + std::to_string(it->second) +
                                           " bytes, the manifest says " + std::to_string(size));
          }
        }
      }
    }
  }
  const std::string key = ManifestKey(normalized);
  if (options.mode == ManifestWriteMode::kCreate) {
    Status status = store.PutIfAbsent(key, text);
    if (status.code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("a Reel dataset already exists at " +
                                DatasetUri(store, normalized) + " (manifest.json present)");
    }
    return status.WithContext(ObjectUri(store, key));
  }
  return store.Put(key, text).WithContext(ObjectUri(store, key));
}

}  // namespace reel::dataset
