// A read-through cache on local disk in front of any ObjectStore (typically S3), so that the
// second read of a shard costs no request to the server.
//
// What is cached: whole objects read through Get, GetRange, Head or OpenReader, up to
// max_object_bytes each. Writes and deletes go to the inner store and drop the cached copy.
// Objects are assumed immutable once written (datasets, checkpoints, weight chunks): a cached
// entry is served without asking the server again. Use Invalidate() or a new key otherwise.
//
// Integrity: every entry records the object's size and ETag as the server reported them, and an
// xxh3 checksum of its bytes; an entry whose size or checksum does not match on read (a torn or
// corrupted cache file) is dropped and the object fetched again. A fetched object whose length
// differs from the size the server reported is refused with DataLoss, never cached.
//
// Concurrent misses of one key in a process cause one fetch (the others wait for its entry).
// Bounds and sharing: the cache directory holds at most max_bytes of entries; least recently
// used entries (by file mtime, touched on each hit) are evicted first. Several processes may
// share one cache directory: entries appear by atomic rename, eviction is serialised with an
// flock(2) lock file, and a reader that opened an entry keeps reading it after an eviction.
//
// Thread-safety: safe from many threads and processes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "storage/object_store.h"

namespace reel::storage {

struct CacheOptions {
  std::string directory;                   // created if missing
  uint64_t max_bytes = 10ull << 30;        // total size of entries kept on disk
  uint64_t max_object_bytes = 2ull << 30;  // larger objects pass through uncached
};

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t corrupt_entries = 0;  // entries dropped because their bytes did not verify
};

class CachingStore : public ObjectStore {
 public:
  // Errors: InvalidArgument for an empty directory or max_bytes == 0; errors creating the
  // directory.
  static Result<std::unique_ptr<CachingStore>> Open(std::unique_ptr<ObjectStore> inner,
                                                    CacheOptions options);
  ~CachingStore() override;

  std::string uri() const override;
  Status Put(std::string_view key, std::string_view data) override;
  Status PutIfAbsent(std::string_view key, std::string_view data) override;
  Result<std::string> Get(std::string_view key, ObjectInfo* info = nullptr) override;
  Result<std::string> GetRange(std::string_view key, uint64_t offset, uint64_t length) override;
  Result<ObjectInfo> Head(std::string_view key) override;
  Result<ListPage> List(const ListOptions& options) override;
  Status Delete(std::string_view key) override;
  Result<std::unique_ptr<ObjectReader>> OpenReader(std::string_view key) override;
  Result<std::unique_ptr<ObjectWriter>> OpenWriter(std::string_view key) override;

  // Drops the cached copy of `key`, if any.
  void Invalidate(std::string_view key);
  // Brings `key` into the cache now (readers prefetch the next shards with it). OK when it is
  // already cached or too large to cache. Errors: the inner store's (NotFound, ...).
  bool SupportsPrefetch() const override { return true; }
  Status Prefetch(std::string_view key) override;
  CacheStats stats() const;
  ObjectStore& inner() { return *inner_; }
  // Bytes of entries now in the directory (scans it).
  uint64_t DiskUsage() const;

 private:
  class Entry;
  CachingStore(std::unique_ptr<ObjectStore> inner, CacheOptions options);
  std::string EntryPath(std::string_view key) const;
  std::string NewTempPath() const;  // dot-named, so scans and eviction skip it
  // The verified cached object, or NotFound when there is no valid entry.
  Result<std::string> ReadEntry(std::string_view key, ObjectInfo* info);
  // Fetches through the inner store and caches the object when it fits.
  Result<std::string> Fill(std::string_view key, ObjectInfo* info);
  void StoreEntry(std::string_view key, std::string_view data, const ObjectInfo& info);
  void EvictIfNeeded();

  std::unique_ptr<ObjectStore> inner_;
  CacheOptions options_;
  std::string namespace_;  // hash of the inner store's URI: one directory serves many stores
  std::atomic<uint64_t> added_since_scan_{0};
  // Single flight: a key being fetched is fetched once; other callers wait for that entry.
  std::mutex filling_mu_;
  std::condition_variable filling_cv_;
  std::set<std::string, std::less<>> filling_;
  uint64_t fills_done_ = 0;  // fills finished, under filling_mu_
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0}, corrupt_{0};
};

}  // namespace reel::storage
