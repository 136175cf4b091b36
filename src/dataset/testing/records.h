// Test support for the dataset tests: deterministic records and stores. Tests only.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "dataset/record.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"

namespace reel::dataset::testing {

// Record `i`: key "clip-000i", label i % num_classes, `payload_bytes` random bytes.
inline Record MakeRecord(int i, size_t payload_bytes, int num_classes = 3,
                         const std::string& ext = "mp4") {
  char key[32];
  std::snprintf(key, sizeof(key), "clip-%04d", i);
  Record r;
  r.key = key;
  r.label = i % num_classes;
  r.label_name = "class" + std::to_string(r.label);
  r.payload = storage::testing::RandomBytes(payload_bytes, 1000 + i);
  r.payload_ext = ext;
  r.metadata = {{"source", "videos/v" + std::to_string(i / 4) + ".avi"},
                {"start_frame", (i % 4) * 16},
                {"end_frame", (i % 4) * 16 + 16},
                {"start_s", (i % 4) * 0.64},
                {"end_s", (i % 4) * 0.64 + 0.64},
                {"fps", 25.0}};
  return r;
}

enum class StoreKind { kMemory, kLocal };

inline std::string StoreKindName(StoreKind kind) {
  return kind == StoreKind::kMemory ? "Memory" : "Local";
}

// A store of the given kind; a local one lives in a fresh temporary directory.
class TestStore {
 public:
  explicit TestStore(StoreKind kind) {
    if (kind == StoreKind::kMemory) {
      store_ = std::make_unique<storage::MemoryStore>("ds");
    } else {
      dir_ = std::make_unique<storage::testing::TempDir>();
      storage::LocalStoreOptions options;
      options.fsync = false;
      auto local = storage::LocalStore::Open(dir_->Join("store"), options);
      if (!local.ok()) std::abort();
      store_ = std::move(local).value();
    }
  }
  storage::ObjectStore& operator*() { return *store_; }
  storage::ObjectStore* operator->() { return store_.get(); }
  storage::ObjectStore& get() { return *store_; }
  // The local directory of a LocalStore ("" for memory).
  std::string directory() const { return dir_ ? dir_->Join("store") : std::string(); }

 private:
  std::unique_ptr<storage::testing::TempDir> dir_;
  std::unique_ptr<storage::ObjectStore> store_;
};

}  // namespace reel::dataset::testing
