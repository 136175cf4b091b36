// Raw chunk bytes by address, the least recently used dropped beyond a byte budget: the delta
// bases of the next push. A run registers checkpoint after checkpoint, each the parent of the
// next, so keeping the chunks a push stored saves the next push from decoding its bases' delta
// chains out of the store (up to max_chain + 1 reads and zstd decompressions per chunk), as git
// keeps a delta base cache. Chunks are addressed by content, so one cache may serve several
// stores (the registry server's sessions share one).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace reel::registry {

class ChunkCache {
 public:
  // A budget of 0 keeps nothing.
  explicit ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // The raw bytes stored under `address`, or null; a hit becomes the most recently used. The
  // bytes stay valid while the caller holds them, evicted or not.
  std::shared_ptr<const std::string> Find(const std::string& address);
  // Keeps a copy of `raw` under `address` (a chunk larger than the whole budget is not kept).
  void Insert(const std::string& address, std::string_view raw);

  uint64_t bytes() const;
  size_t size() const;
  uint64_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const std::string>>;
  void EvictBeyond(uint64_t budget);  // mu_ held

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t bytes_ = 0;
};

}  // namespace reel::registry
