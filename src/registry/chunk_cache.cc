#include "registry/chunk_cache.h"

namespace reel::registry {

std::shared_ptr<const std::string> ChunkCache::Find(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(address);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ChunkCache::Insert(const std::string& address, std::string_view raw) {
  if (raw.size() > capacity_ || Find(address) != nullptr) return;  // a hit: now the most recent
  // The copy is made outside the lock: pushes insert whole versions, 4 MiB at a time.
  auto bytes = std::make_shared<const std::string>(raw);
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(address) != 0) return;  // another thread inserted it meanwhile
  EvictBeyond(capacity_ - raw.size());
  lru_.emplace_front(address, std::move(bytes));
  index_.emplace(address, lru_.begin());
  bytes_ += raw.size();
}

void ChunkCache::EvictBeyond(uint64_t budget) {
  while (bytes_ > budget && !lru_.empty()) {
    bytes_ -= lru_.back().second->size();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ChunkCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace reel::registry
