// Reads the shards ShardWriter publishes (record.h, shard_index.h): random access to one record
// with one ranged GET, or every record in order streaming the whole .tar once.
//
// Integrity: every member's data is checked against the XXH3-64 in the index. A mismatch, a
// .cls that is not the index's label, a .json that is not a JSON object, a missing member, or a
// tar whose members do not sit where the index says gives DataLoss naming the shard's URI and the
// record's key. A corrupt record never hides the others: ReadRecord of another index still works
// and Iterator::Next continues with the next record after a checksum error.
//
// Errors every call can return besides DataLoss: the store's (NotFound when the shard or its
// index is missing, Unavailable, ...).
// Thread-safety: ShardReader is immutable after Open; ReadRecord may be called from many threads
// at once. An Iterator belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "dataset/record.h"
#include "dataset/shard_index.h"
#include "dataset/shard_writer.h"
#include "dataset/tar.h"
#include "storage/object_store.h"

namespace reel::dataset {

class ShardReader {
 public:
  // Reads and validates "<root>/<split>/shard-NNNNNN.idx" (one GET). `store` must outlive the
  // reader. Errors: InvalidArgument for a bad root or split; NotFound when the index is missing
  // (the shard is unfinished or absent); ShardIndex::Parse's errors; DataLoss when the index
  // names another split or shard.
  static Result<std::unique_ptr<ShardReader>> Open(storage::ObjectStore& store,
                                                   std::string_view root, std::string_view split,
                                                   uint32_t number);

  const ShardIndex& index() const { return index_; }
  size_t num_records() const { return index_.records.size(); }
  const std::string& tar_key() const { return tar_key_; }
  const std::string& index_key() const { return index_key_; }
  uint64_t index_bytes() const { return index_bytes_; }

  // The position of `key` in the index, or nullopt.
  std::optional<size_t> Find(std::string_view key) const;

  // Record `i` (in tar order) with one GetRange covering its members. Errors: OutOfRange for
  // i >= num_records(); DataLoss (see above); the store's.
  Result<Record> ReadRecord(size_t i) const;

  // Streams the .tar once, front to back, checking it against the index.
  class Iterator {
   public:
    ~Iterator();
    // Fills `record` with the next record; false after the last one. After DataLoss for one
    // record's content (checksum, .cls, .json) the next call continues with the following
    // record; after any other error every call returns that error.
    Result<bool> Next(Record* record);
    // Index of the record the next call reads.
    size_t position() const { return next_; }

   private:
    friend class ShardReader;
    Iterator(const ShardReader* shard, std::unique_ptr<storage::ObjectReader> object);
    const ShardReader* shard_;
    std::unique_ptr<storage::ObjectReader> object_;
    std::unique_ptr<TarReader> tar_;
    size_t next_ = 0;
    bool ended_ = false;
    Status broken_;
  };
  // Errors: the store's (NotFound for a missing .tar); DataLoss when the .tar's size is not the
  // index's tar_bytes.
  Result<std::unique_ptr<Iterator>> Iterate() const;

  ShardStats Stats() const;

 private:
  ShardReader(storage::ObjectStore& store, std::string root, std::string split, uint32_t number,
              ShardIndex index, uint64_t index_bytes);
  // Checks one record's member data (already read) and builds the Record.
  // `data[j]` is the data of index_.records[i].members[j].
  Result<Record> BuildRecord(size_t i, const std::vector<std::string_view>& data) const;
  std::string RecordContext(size_t i) const;

  storage::ObjectStore& store_;
  std::string root_;
  std::string split_;
  uint32_t number_;
  std::string tar_key_;
  std::string index_key_;
  ShardIndex index_;
  uint64_t index_bytes_;
  std::unordered_map<std::string_view, size_t> positions_;  // key -> index (views into index_)
};

// Numbers of the finished shards of a split (both .tar and .idx present), ascending. A .tar
// without .idx (an unfinished shard) and an .idx without .tar are left out. Objects under the
// split that are not shards are ignored. Errors: InvalidArgument; the store's.
Result<std::vector<uint32_t>> ListShards(storage::ObjectStore& store, std::string_view root,
                                         std::string_view split);

// Stats of every finished shard of a split, from their indexes (one GET each), in order; when
// `keys` is given, every record's key is claimed in it (for resuming with ShardWriter).
// Errors: ListShards's, ShardReader::Open's, AlreadyExists for a key already in `keys`.
Result<std::vector<ShardStats>> LoadShardStats(storage::ObjectStore& store, std::string_view root,
                                               std::string_view split, KeyRegistry* keys = nullptr);

}  // namespace reel::dataset
