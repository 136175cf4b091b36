// manifest.json: the description of a whole Reel dataset, written last, after every shard of
// every split is published; its presence means the dataset is complete. Loaders find shards
// through it (not by listing), so shards that a failed run left behind are never read.
//
// Schema (format version 1; pretty-printed UTF-8 JSON, keys sorted):
//   {
//     "format": "reel-dataset",
//     "format_version": 1,
//     "name": "ucf101",                     // non-empty
//     "mode": "video",                      // "video" (<key>.mp4) | "frames" (<key>.frames.zst)
//                                           // | "features" (<key>.f32, `reel features`)
//     "classes": ["ApplyEyeMakeup", ...],   // class names in index order; unique, non-empty
//     "clip_settings": {...},               // opaque object from the ingest (clip length, ...)
//     "source_hash": "...",                 // opaque string from the ingest (listing's hash)
//     "features": {"dim": 128, ...},        // mode "features" only: the embedding's width, and
//                                           // what made it (serve/features.h)
//     "splits": {
//       "train": {
//         "records": 9537,                  // == sum of class_counts == sum of shard records
//         "bytes": 1234567890,              // == sum of shard tar_bytes
//         "class_counts": [120, 98, ...],   // per class index; as long as "classes"
//         "shards": [                       // in shard-number order
//           {"name": "shard-000000", "records": 1190, "tar_bytes": 134217216,
//            "index_bytes": 183411}, ...]
//       }, ...
//     }
//   }
// Shard objects are "<root>/<split>/<name>.tar" and "<root>/<split>/<name>.idx" (layout.h).
//
// Thread-safety: a plain value; Read and Write are safe from many threads.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "dataset/layout.h"
#include "dataset/shard_writer.h"
#include "storage/object_store.h"

namespace reel::dataset {

inline constexpr int kManifestVersion = 1;
inline constexpr std::string_view kManifestFormat = "reel-dataset";

struct ShardEntry {
  std::string name;  // "shard-000000"
  uint64_t records = 0;
  uint64_t tar_bytes = 0;
  uint64_t index_bytes = 0;
};

struct SplitInfo {
  uint64_t records = 0;
  uint64_t bytes = 0;                  // sum of the shards' tar_bytes
  std::vector<uint64_t> class_counts;  // [class index] -> records
  std::vector<ShardEntry> shards;      // ascending shard numbers
};

enum class ManifestWriteMode {
  kCreate,   // PutIfAbsent: AlreadyExists when the root already holds a dataset
  kReplace,  // Put: replaces an existing manifest
};

struct ManifestWriteOptions {
  ManifestWriteMode mode = ManifestWriteMode::kCreate;
  // List each split and check that every shard's .tar and .idx exist with the recorded sizes
  // (one paginated List per split) before publishing. FailedPrecondition names the first
  // missing or mismatched object.
  bool verify_shards = true;
};

struct Manifest {
  int format_version = kManifestVersion;
  std::string name;
  DatasetMode mode = DatasetMode::kVideo;
  std::vector<std::string> classes;
  std::map<std::string, SplitInfo> splits;
  nlohmann::json clip_settings = nlohmann::json::object();
  std::string source_hash;
  // Mode kFeatures: {"dim": width of each record's embedding, ...}; empty for the other modes.
  nlohmann::json features = nlohmann::json::object();
  // features.dim (0 for a dataset of another mode).
  int64_t feature_dim() const;

  // Fills splits[split] from the stats a ShardWriter (or LoadShardStats) produced.
  // Errors: InvalidArgument for a bad or already present split name, a label outside `classes`,
  // duplicate shard numbers.
  Status AddSplit(std::string_view split, const std::vector<ShardStats>& shards);

  // The consistency rules of the schema above. InvalidArgument naming the first broken rule.
  Status Validate() const;

  // The JSON document. Errors: InvalidArgument from Validate or for strings that are not UTF-8.
  Result<std::string> Serialize() const;
  // Errors: DataLoss for malformed JSON (the parser's message), missing or mistyped fields and
  // broken consistency rules; FailedPrecondition for a format_version other than 1.
  // `what` names the document in messages.
  static Result<Manifest> Parse(std::string_view text, std::string_view what = "manifest.json");

  // Reads "<root>/manifest.json". Errors: NotFound "no Reel dataset at <uri>: manifest.json
  // missing"; Parse's errors (prefixed with the manifest's URI); the store's errors.
  static Result<Manifest> Read(storage::ObjectStore& store, std::string_view root);

  // Validates, optionally verifies the shards (see ManifestWriteOptions), and publishes
  // "<root>/manifest.json" atomically. Errors: InvalidArgument; AlreadyExists (kCreate);
  // FailedPrecondition (verification); the store's errors.
  Status Write(storage::ObjectStore& store, std::string_view root,
               const ManifestWriteOptions& options = {}) const;
};

}  // namespace reel::dataset
