// Writes one split of a dataset as WebDataset-style tar shards plus their indexes:
// "<root>/<split>/shard-NNNNNN.tar" and ".idx" (layout.h, record.h, shard_index.h).
//
// Sizing: records go to the open shard until the next one would take it past target_bytes
// (headers, padding and the end-of-archive marker counted); then the shard is published and a
// new one started. A shard therefore holds at most target_bytes, except a shard whose single
// record is larger on its own. Shard numbers are consecutive from options.first_shard, so the
// same records in the same order with the same options give byte-identical shards.
//
// Publishing, so that no reader sees a half-written shard: when a shard opens, its .idx is
// deleted (a stale index never describes a new tar); the .tar is streamed through
// ObjectStore::OpenWriter and committed by Close(), which the store makes atomic; then the .idx
// is Put. A .tar without an .idx is unfinished and ignored by ListShards and the loader.
//
// Resuming: a run that stopped after publishing shards 0..N-1 restarts with first_shard = N
// (LoadShardStats() recovers the finished shards' stats and keys). The shard it was writing has
// no .idx; shard N is rewritten from scratch.
//
// Errors from AddRecord / Finish: InvalidArgument for a bad record (invalid key, label < 0,
// empty label name, payload extension other than the mode's, metadata not an object or
// disagreeing with the fields the writer owns, non-UTF-8 metadata); AlreadyExists for a key
// already written (to this writer or the shared KeyRegistry); the store's errors. After a store
// error the writer is broken: every later call returns that error and nothing more is
// published. Destroying a writer without Finish() discards the open shard (no .tar, no .idx).
//
// Thread-safety: a ShardWriter belongs to one thread at a time. KeyRegistry is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "dataset/layout.h"
#include "dataset/record.h"
#include "dataset/shard_index.h"
#include "dataset/tar.h"
#include "storage/object_store.h"

namespace reel::dataset {

inline constexpr uint64_t kDefaultShardTargetBytes = 128ull << 20;

// What one published shard holds.
struct ShardStats {
  std::string split;
  uint32_t number = 0;
  std::string name;       // "shard-000123"
  std::string tar_key;    // "<root>/<split>/shard-000123.tar"
  std::string index_key;  // "<root>/<split>/shard-000123.idx"
  uint64_t records = 0;
  uint64_t tar_bytes = 0;
  uint64_t index_bytes = 0;
  std::vector<uint64_t> class_counts;  // [label] -> records, sized to the largest label + 1
};

// The set of sample keys already used in a dataset, shared by the writers of all its splits so
// that keys stay unique across the dataset. Thread-safe.
class KeyRegistry {
 public:
  // AlreadyExists when `key` was claimed before.
  Status Claim(std::string_view key);
  bool Contains(std::string_view key) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_set<std::string> keys_;
};

struct ShardWriterOptions {
  DatasetMode mode = DatasetMode::kVideo;  // fixes the payload extension
  uint64_t target_bytes = kDefaultShardTargetBytes;
  uint32_t first_shard = 0;  // number of the first shard written
  int64_t mtime = 0;         // of every tar member (0: reproducible shards)
  // Shared across the splits of a dataset; null gives the writer a registry of its own.
  std::shared_ptr<KeyRegistry> keys;
  // Called after each shard is published (its .idx written), e.g. to checkpoint progress.
  std::function<void(const ShardStats&)> on_shard_published;
};

class ShardWriter {
 public:
  // `store` must outlive the writer. Errors: InvalidArgument for a bad root or split name or a
  // target_bytes below 4 KiB.
  static Result<std::unique_ptr<ShardWriter>> Create(storage::ObjectStore& store,
                                                     std::string_view root, std::string_view split,
                                                     ShardWriterOptions options = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends the record's three members to the open shard, first publishing the open shard if
  // the record would take it past the target. Errors: see the top of this file.
  Status AddRecord(const Record& record);

  // Publishes the open shard, if it holds any record. A writer that received no record publishes
  // nothing. Later calls of AddRecord or Finish give FailedPrecondition.
  Status Finish();

  // Shards published so far, in order.
  const std::vector<ShardStats>& shards() const { return published_; }
  // Records accepted so far (published or in the open shard).
  uint64_t records() const { return records_; }
  const std::string& split() const { return split_; }

 private:
  struct OpenShard;
  ShardWriter(storage::ObjectStore& store, std::string root, std::string split,
              ShardWriterOptions options);
  Status StartShard();
  Status PublishShard();
  Status Broken(Status status);

  storage::ObjectStore& store_;
  std::string root_;
  std::string split_;
  ShardWriterOptions options_;
  std::unique_ptr<OpenShard> open_;
  uint32_t next_number_;
  uint64_t records_ = 0;
  std::vector<ShardStats> published_;
  bool finished_ = false;
  Status broken_;
};

}  // namespace reel::dataset
