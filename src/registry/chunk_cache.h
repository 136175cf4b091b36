// Raw chunk bytes by address, the least recently used dropped beyond a byte budget: the delta
// bases of the next push. A run registers checkpoint after checkpoint, each the parent of the
// next, so keeping the chunks a push stored saves the next push from decoding its bases' delta
// chains out of the store (up to max_chain + 1 reads and zstd decompressions per chunk), as git
// keeps a delta base cache. Chunks are addressed by content, so one cache may serve several
// stores (the registry server's sessions share one).
//
// A cache given a folder also keeps chunks between processes: `reel models register` runs in a
// process of its own, and without them decodes its bases' chains from the store (8 zstd frames a
// chunk at the default depth, twice the push's own work). Persist writes the chunks this process
// inserted there, newest first, and removes the folder's oldest files beyond the same budget;
// Find looks there after memory, mapping the file rather than reading it (fresh memory costs a
// page fault per 4 KiB, which on a VM took longer than the read). Each file ends with the xxh3 of
// its bytes, and is used only while they match, so a damaged one is a miss (and is removed),
// never a wrong base: the bytes were checked against their address when they entered the cache.
// Thread-safety: every method may be called from any thread; processes may share a folder.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/status.h"

namespace reel::registry {

// A chunk's raw bytes, in memory or mapped from a cache folder's file; valid while held.
using ChunkBytes = std::shared_ptr<const std::string_view>;
// Bytes of its own.
ChunkBytes OwnedChunkBytes(std::string bytes);

class ChunkCache {
 public:
  // A budget of 0 keeps nothing. `folder`: "" for memory only.
  explicit ChunkCache(uint64_t capacity_bytes, std::string folder = "")
      : capacity_(capacity_bytes), folder_(std::move(folder)) {}
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // The raw bytes stored under `address`, or null; a hit becomes the most recently used. The
  // bytes stay valid while the caller holds them, evicted or not.
  ChunkBytes Find(const std::string& address);
  // Keeps a copy of `raw` under `address` (a chunk larger than the whole budget is not kept).
  void Insert(const std::string& address, std::string_view raw);
  // Writes the chunks inserted since the last Persist to the folder (none without one), then
  // trims it to the budget. Errors: the file system's; the cache in memory is unchanged.
  Status Persist();

  uint64_t bytes() const;
  size_t size() const;
  uint64_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<std::string, ChunkBytes>;
  ChunkBytes FindInMemory(const std::string& address);
  ChunkBytes FindInFolder(const std::string& address);
  void Keep(const std::string& address, ChunkBytes bytes, bool unsaved);
  void EvictBeyond(uint64_t budget);  // mu_ held

  const uint64_t capacity_;
  const std::string folder_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t bytes_ = 0;
  std::unordered_set<std::string> unsaved_;  // inserted, not yet in the folder
};

}  // namespace reel::registry
