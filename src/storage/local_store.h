// ObjectStore on a local or shared (NFS, CephFS, Lustre) file system, rooted at a directory.
// Key "a/b/c" is the file ROOT/a/b/c; parent directories are created as needed.
//
// Durability and atomicity: every write goes to a temporary file in the target directory
// (".reel-tmp-*", never listed), is fsync'ed, then renamed over the target and the directory
// fsync'ed, so readers see the old or the new object, never a torn one, even across a crash or
// with many processes writing the same key. PutIfAbsent publishes with link(2), which fails if
// the name exists, so exactly one racing writer wins. A batch (NewBatch) writes its temp files
// at Put and does the fsyncs and renames of all of them at Commit. A writer killed halfway
// leaves its temp files behind (never listed; nothing removes them yet).
//
// Errors beyond ObjectStore's: NotFound when the root does not exist at open time;
// FailedPrecondition when a key's parent is a file ("a" is an object, so "a/b" cannot be).
// Thread-safety: safe from many threads and many processes.
#pragma once

#include <memory>
#include <string>

#include "storage/object_store.h"

namespace reel::storage {

struct LocalStoreOptions {
  bool create_root = true;  // mkdir -p the root when it does not exist
  bool fsync = true;        // false trades crash durability for speed (scratch data)
};

class LocalStore : public ObjectStore {
 public:
  // `root` is an absolute directory path.
  static Result<std::unique_ptr<LocalStore>> Open(const std::string& root,
                                                  LocalStoreOptions options = {});

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
  // Puts written at once and flushed together at Commit: two journal commits per batch.
  std::unique_ptr<PutBatch> NewBatch() override;
  // The object's file (nullopt for an invalid key); it may not exist.
  std::optional<std::string> LocalPath(std::string_view key) const override;

  const std::string& root() const { return root_; }

  // Implementation details shared with the writer; not for callers.
  std::string PathOf(std::string_view key) const { return root_ + "/" + std::string(key); }
  bool fsync_enabled() const { return options_.fsync; }

 private:
  LocalStore(std::string root, LocalStoreOptions options);
  enum class Publish { kReplace, kIfAbsent };
  Status WriteAtomically(std::string_view key, std::string_view data, Publish mode);
  void RemoveEmptyParents(const std::string& path) const;

  std::string root_;
  LocalStoreOptions options_;
};

}  // namespace reel::storage
