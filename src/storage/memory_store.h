// An in-memory ObjectStore for unit tests of other parts. Behaves like the real stores
// (key validation, atomic PutIfAbsent, paging, ranges, delimiter listing) and counts the calls
// it receives so tests can assert how often a layer above touched it.
// Thread-safety: all methods are safe from many threads.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "storage/object_store.h"

namespace reel::storage {

class MemoryStore : public ObjectStore {
 public:
  explicit MemoryStore(std::string name = "test");

  std::string uri() const override { return "mem://" + name_; }
  Status Put(std::string_view key, std::string_view data) override;
  Status PutIfAbsent(std::string_view key, std::string_view data) override;
  Result<std::string> Get(std::string_view key, ObjectInfo* info = nullptr) override;
  Result<std::string> GetRange(std::string_view key, uint64_t offset, uint64_t length) override;
  Result<ObjectInfo> Head(std::string_view key) override;
  Result<ListPage> List(const ListOptions& options) override;
  Status Delete(std::string_view key) override;
  Result<std::unique_ptr<ObjectReader>> OpenReader(std::string_view key) override;
  Result<std::unique_ptr<ObjectWriter>> OpenWriter(std::string_view key) override;

  // Number of calls of any method above since construction.
  uint64_t request_count() const { return requests_.load(); }

 private:
  struct Object {
    std::shared_ptr<const std::string> data;  // shared so open readers survive a replace
    ObjectInfo info;
  };
  Status PutLocked(std::string_view key, std::string_view data);

  std::string name_;
  mutable std::mutex mu_;
  std::map<std::string, Object, std::less<>> objects_;
  uint64_t version_ = 0;
  std::atomic<uint64_t> requests_{0};
};

}  // namespace reel::storage
