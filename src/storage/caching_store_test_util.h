// Helpers shared by caching_store_test.cc and caching_store_disk_test.cc: the entry files of a
// cache directory, reading a whole stream, and the CachingStoreTest fixture (one class for both
// files, as gtest requires of a suite). Tests only.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/caching_store.h"
#include "storage/memory_store.h"
#include "storage/object_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage::testing {

// Entry files of a cache directory (dot files are the lock and temporaries).
inline std::vector<std::string> EntryFiles(const std::string& directory) {
  std::vector<std::string> out;
  for (const std::string& name : FilesUnder(directory)) {
    if (name[0] != '.') out.push_back(name);
  }
  return out;
}

// Reads `reader` to its end in `chunk`-byte reads; stops at the first error, into `error`.
inline std::string ReadAll(ObjectReader& reader, size_t chunk, Status* error) {
  std::string out;
  std::string buffer(chunk, '\0');
  while (true) {
    auto n = reader.Read(buffer.data(), buffer.size());
    if (!n.ok()) {
      *error = n.status();
      return out;
    }
    if (*n == 0) return out;
    out.append(buffer.data(), *n);
  }
}

// A CachingStore over a fresh MemoryStore (inner_), on a cache directory of its own; Open()
// again to change the options over the same directory.
class CachingStoreTest : public ::testing::Test {
 protected:
  void Open(CacheOptions options = {}, const std::string& inner_name = "origin") {
    auto memory = std::make_unique<MemoryStore>(inner_name);
    inner_ = memory.get();
    options.directory = directory_;
    auto opened = CachingStore::Open(std::move(memory), options);
    ASSERT_OK(opened);
    cache_ = std::move(opened).value();
  }
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open()); }

  // Inner requests made by `fn`.
  template <typename Fn>
  uint64_t RequestsOf(Fn&& fn) {
    uint64_t before = inner_->request_count();
    fn();
    return inner_->request_count() - before;
  }

  TempDir dir_;
  std::string directory_ = dir_.Join("cache");
  MemoryStore* inner_ = nullptr;  // owned by cache_
  std::unique_ptr<CachingStore> cache_;
};

}  // namespace reel::storage::testing
