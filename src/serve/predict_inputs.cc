// Listing what `reel predict` reads (predict.h): a folder or prefix, one video, a CSV/JSONL
// list, or the source videos of an ingested dataset.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "base/csv.h"
#include "base/thread_pool.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "ingest/sources.h"
#include "serve/predict.h"
#include "storage/open.h"

namespace reel::serve {
namespace {

using nlohmann::json;
using storage::ObjectStore;

std::string LowerAscii(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool HasSuffix(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string TrimmedField(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string KeyBelow(const std::string& folder, const std::string& rest) {
  return folder.empty() ? rest : folder + "/" + rest;
}

std::string FolderOfKey(const std::string& key) {
  const size_t slash = key.rfind('/');
  return slash == std::string::npos ? "" : key.substr(0, slash);
}

PredictInput StoredInput(const ObjectStore& store, std::string key, std::string object) {
  PredictInput in;
  in.key = std::move(key);
  in.source = storage::ObjectUri(store, object);
  in.object = std::move(object);
  return in;
}

// Every video under `folder`, keyed by its path below it.
Result<PredictListing> ListVideoFolder(const std::shared_ptr<ObjectStore>& store,
                                       const std::string& folder) {
  const std::string prefix = folder.empty() ? "" : folder + "/";
  REEL_ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects, storage::ListAll(*store, prefix));
  PredictListing listing{"folder", store, {}};
  for (const storage::ObjectInfo& o : objects) {
    if (!ingest::IsVideoKey(o.key)) continue;
    listing.inputs.push_back(StoredInput(*store, o.key.substr(prefix.size()), o.key));
  }
  if (listing.inputs.empty())
    return NotFoundError("no videos under " + storage::ObjectUri(*store, folder));
  return listing;
}

struct ListEntry {
  std::string path;
  std::string label;
};

// A CSV list: a header naming "path" (or "uri") and optionally "label".
Result<std::vector<ListEntry>> CsvEntries(std::string_view text, const std::string& name) {
  REEL_ASSIGN_OR_RETURN(std::vector<CsvRow> rows, ParseCsv(text, name));
  if (rows.empty()) return InvalidArgumentError(name + ": empty list");
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < rows[0].fields.size(); ++i) {
    column[LowerAscii(TrimmedField(rows[0].fields[i]))] = i;
  }
  const auto path = column.count("path") ? column.find("path") : column.find("uri");
  const auto label = column.find("label");
  if (path == column.end()) {
    return InvalidArgumentError(name + ":1: the header must name a 'path' (or 'uri') column");
  }
  std::vector<ListEntry> entries;
  for (size_t r = 1; r < rows.size(); ++r) {
    const std::vector<std::string>& f = rows[r].fields;
    const std::string where = name + ":" + std::to_string(rows[r].line);
    if (f.size() != rows[0].fields.size()) {
      return InvalidArgumentError(where + ": expected " + std::to_string(rows[0].fields.size()) +
                                  " columns, got " + std::to_string(f.size()));
    }
    entries.push_back({TrimmedField(f[path->second]),
                       label == column.end() ? "" : TrimmedField(f[label->second])});
    if (entries.back().path.empty()) return InvalidArgumentError(where + ": empty path");
  }
  return entries;
}

// A JSONL list: objects with a string "path" (or "uri") and optionally a "label".
Result<std::vector<ListEntry>> JsonlEntries(const std::string& text, const std::string& name) {
  std::vector<ListEntry> entries;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (TrimmedField(line).empty()) continue;
    const json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto path = row.find("path");
    if (path == row.end()) path = row.find("uri");
    if (path == row.end() || !path->is_string() || path->get<std::string>().empty()) {
      return InvalidArgumentError(name + ":" + std::to_string(number) +
                                  ": expected an object with a string \"path\" (or \"uri\")");
    }
    const auto label = row.find("label");
    entries.push_back({path->get<std::string>(), label == row.end()   ? ""
                                                 : label->is_string() ? label->get<std::string>()
                                                                      : label->dump()});
  }
  return entries;
}

// A list's entry: a relative path is a key below the list's folder, the rest are URIs.
PredictInput EntryInput(const ObjectStore& store, const std::string& folder, ListEntry entry) {
  PredictInput in;
  if (entry.path.find("://") != std::string::npos || entry.path[0] == '/') {
    in.key = in.source = entry.path;
  } else {
    in = StoredInput(store, entry.path, KeyBelow(folder, entry.path));
  }
  in.true_label = std::move(entry.label);
  return in;
}

// A Kinetics CSV as `reel ingest` reads it; rows whose video is missing become error lines.
Result<PredictListing> ListKineticsCsv(const std::shared_ptr<ObjectStore>& store,
                                       const std::string& key) {
  REEL_ASSIGN_OR_RETURN(ingest::SourceListing sources,
                        ingest::ListKinetics(*store, key, FolderOfKey(key)));
  PredictListing listing{"kinetics", store, {}};
  for (const ingest::SourceVideo& v : sources.videos) {
    PredictInput in = StoredInput(*store, v.key, v.key);
    in.true_label = sources.class_names[static_cast<size_t>(v.label)];
    in.split = v.split;
    listing.inputs.push_back(std::move(in));
  }
  for (const ingest::MissingVideo& m : sources.missing) {
    listing.inputs.push_back({m.reference, m.reference, "", "", "", m.reason});
  }
  return listing;
}

Result<PredictListing> ListVideoList(const std::shared_ptr<ObjectStore>& store,
                                     const std::string& key) {
  REEL_ASSIGN_OR_RETURN(std::string text, store->Get(key));
  const std::string name = storage::ObjectUri(*store, key);
  const bool jsonl = HasSuffix(LowerAscii(key), ".jsonl");
  const std::string header = LowerAscii(text.substr(0, text.find('\n')));
  if (!jsonl && header.find("youtube_id") != std::string::npos) return ListKineticsCsv(store, key);
  REEL_ASSIGN_OR_RETURN(std::vector<ListEntry> entries,
                        jsonl ? JsonlEntries(text, name) : CsvEntries(text, name));
  PredictListing listing{"list", store, {}};
  std::set<std::string> seen;
  for (ListEntry& entry : entries) {
    if (!seen.insert(entry.path).second) continue;
    listing.inputs.push_back(EntryInput(*store, FolderOfKey(key), std::move(entry)));
  }
  if (listing.inputs.empty()) return NotFoundError(name + " lists no video");
  return listing;
}

// The source videos of one shard's records (their metadata's "source"), with class and split.
Result<std::vector<PredictInput>> ShardSources(ObjectStore& store, const std::string& root,
                                               const std::string& split,
                                               const std::string& shard_name,
                                               const std::vector<std::string>& classes) {
  const std::optional<uint32_t> number = dataset::ParseShardName(shard_name);
  if (!number) return DataLossError("manifest names a shard '" + shard_name + "'");
  REEL_ASSIGN_OR_RETURN(auto reader, dataset::ShardReader::Open(store, root, split, *number));
  std::vector<PredictInput> found;
  for (const dataset::IndexRecord& record : reader->index().records) {
    const dataset::IndexMember* meta = record.Find("json");
    if (meta == nullptr) continue;
    REEL_ASSIGN_OR_RETURN(std::string text,
                          store.GetRange(reader->tar_key(), meta->offset, meta->size));
    const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    const auto source = doc.find("source");
    if (source == doc.end() || !source->is_string()) continue;
    PredictInput in;
    in.key = in.source = source->get<std::string>();
    const auto label = static_cast<size_t>(record.label);
    in.true_label = label < classes.size() ? classes[label] : "";
    in.split = split;
    found.push_back(std::move(in));
  }
  return found;
}

// Each source video of the dataset at `root` once, in URI order.
Result<PredictListing> ListDatasetSources(const std::shared_ptr<ObjectStore>& store,
                                          const std::string& root, int parallelism) {
  REEL_ASSIGN_OR_RETURN(dataset::Manifest manifest, dataset::Manifest::Read(*store, root));
  std::vector<std::pair<std::string, std::string>> shards;  // split, shard name
  for (const auto& [split, info] : manifest.splits) {
    for (const dataset::ShardEntry& shard : info.shards) shards.emplace_back(split, shard.name);
  }
  std::vector<std::vector<PredictInput>> found(shards.size());
  REEL_RETURN_IF_ERROR(ParallelFor(
      static_cast<size_t>(std::max(1, parallelism)), shards.size(), [&](size_t i) -> Status {
        REEL_ASSIGN_OR_RETURN(found[i], ShardSources(*store, root, shards[i].first,
                                                     shards[i].second, manifest.classes));
        return Status::Ok();
      }));
  std::map<std::string, PredictInput> by_source;
  for (std::vector<PredictInput>& shard : found) {
    for (PredictInput& in : shard) by_source.emplace(in.key, std::move(in));
  }
  PredictListing listing{"dataset", store, {}};
  for (auto& entry : by_source) listing.inputs.push_back(std::move(entry.second));
  if (listing.inputs.empty()) {
    return NotFoundError("the dataset at " + storage::ObjectUri(*store, root) +
                         " records no source videos");
  }
  return listing;
}

}  // namespace

Result<PredictListing> ListPredictInputs(const std::string& uri, int parallelism) {
  REEL_ASSIGN_OR_RETURN(storage::ObjectLocation at, storage::OpenObjectUri(uri));
  std::shared_ptr<ObjectStore> store = std::move(at.store);
  const std::string lower = LowerAscii(at.key);
  if (HasSuffix(lower, ".csv") || HasSuffix(lower, ".jsonl")) return ListVideoList(store, at.key);
  if (lower == "manifest.json" || HasSuffix(lower, "/manifest.json")) {
    return ListDatasetSources(store, FolderOfKey(at.key), parallelism);
  }
  if (ingest::IsVideoKey(at.key) && store->Head(at.key).ok()) {
    const std::string name = at.key.substr(at.key.rfind('/') + 1);
    return PredictListing{"video", store, {StoredInput(*store, name, at.key)}};
  }
  if (store->Head(KeyBelow(at.key, "manifest.json")).ok()) {
    return ListDatasetSources(store, at.key, parallelism);
  }
  return ListVideoFolder(store, at.key);
}

}  // namespace reel::serve
