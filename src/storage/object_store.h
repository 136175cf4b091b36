// ObjectStore: the one interface every part of Reel uses to read and write bytes, whether they
// live on a local disk, a shared file system, an S3-compatible object store (AWS, Ceph RGW,
// MinIO) or in memory for unit tests.
//
// Keys are '/'-separated, relative, UTF-8 strings ("dataset/shard-00001.tar"). A key must not be
// empty, start with '/', contain a "." or ".." segment, a NUL byte or a backslash; such keys are
// refused with InvalidArgument by every store, so data never escapes a store's root.
//
// Errors every operation can return (besides those listed per operation):
//   InvalidArgument   bad key or arguments
//   PermissionDenied  credentials refused (AccessDenied, SignatureDoesNotMatch, file modes)
//   Unavailable       the store could not be reached after the retry budget was spent
//   ResourceExhausted disk full and similar
//   Internal          an unexpected answer from the store (the message quotes it)
//
// Thread-safety: every ObjectStore is safe to use from many threads at once. Readers and
// writers returned by OpenReader / OpenWriter belong to one thread at a time.
// Consistency: a Put or a committed writer is visible to every later Get in full or not at all;
// no reader ever sees a torn object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::storage {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  // Changes whenever the content changes. For S3 the server's ETag (quotes removed); for local
  // files derived from inode, size and modification time.
  std::string etag;
  int64_t mtime_ms = 0;  // milliseconds since the Unix epoch
};

struct ListOptions {
  std::string prefix;      // only keys starting with this
  std::string delimiter;   // "" lists recursively; "/" groups deeper keys into common_prefixes
  std::string page_token;  // from the previous page's next_page_token; "" for the first page
  int max_keys = 1000;     // page size, 1..1000
};

struct ListPage {
  std::vector<ObjectInfo> objects;           // in ascending key order (byte-wise)
  std::vector<std::string> common_prefixes;  // with delimiter: "dir/" entries, ascending
  std::string next_page_token;               // "" when this was the last page
};

// A streaming read of one object. Not thread-safe.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  // Reads up to `n` bytes into `buffer`; returns 0 at the end of the object.
  // Errors: Unavailable, DataLoss (the object changed or shrank while being read).
  virtual Result<size_t> Read(char* buffer, size_t n) = 0;
  virtual uint64_t size() const = 0;  // the object's total size
};

// A streaming write of one object, for objects larger than memory. Nothing is visible to
// readers until Close() succeeds; destroying a writer without Close() discards what was written
// (temp files removed, multipart uploads aborted). Not thread-safe.
class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  virtual Status Write(std::string_view data) = 0;
  // Commits the object. After a failed Close nothing was committed.
  virtual Status Close() = 0;
};

// Puts made durable and visible together at Commit, so that a store on a file system pays one
// journal commit for the whole batch instead of two per object (a registry push writes hundreds
// of chunks). Put is safe from many threads at once. After a successful Commit, every object Put
// before it is visible and durable; before it, an object may or may not be visible (a store
// without batches puts it at once). Commit may be called again for later Puts. Destroying a
// batch discards what it had not made visible. Errors: those of ObjectStore::Put.
class PutBatch {
 public:
  virtual ~PutBatch() = default;
  virtual Status Put(std::string_view key, std::string_view data) = 0;
  // Put of the pieces one after another, without joining them first where the store can.
  virtual Status PutJoined(std::string_view key, const std::vector<std::string_view>& pieces);
  virtual Status Commit() = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The store's root as a URI: "file:///data/reel", "s3://bucket/prefix", "mem://name".
  virtual std::string uri() const = 0;

  // Creates or replaces the object atomically.
  virtual Status Put(std::string_view key, std::string_view data) = 0;

  // Creates the object only if no object has that key; the check and the write are one atomic
  // step, so exactly one of several racing callers wins (locks, manifests).
  // Errors: AlreadyExists when the key exists.
  virtual Status PutIfAbsent(std::string_view key, std::string_view data) = 0;

  // The whole object; `info`, when given, receives its metadata as of that read.
  // Errors: NotFound (missing key or, for S3, missing bucket: the message says which).
  virtual Result<std::string> Get(std::string_view key, ObjectInfo* info = nullptr) = 0;

  // Bytes [offset, offset + length) clipped at the end of the object; offset == size gives "".
  // Errors: NotFound; OutOfRange when offset > size.
  virtual Result<std::string> GetRange(std::string_view key, uint64_t offset, uint64_t length) = 0;

  // Errors: NotFound.
  virtual Result<ObjectInfo> Head(std::string_view key) = 0;

  // One page of keys under options.prefix. Errors: InvalidArgument for max_keys out of range or
  // a page token this store did not issue; NotFound for a missing bucket.
  virtual Result<ListPage> List(const ListOptions& options) = 0;

  // Removes the object. Deleting a missing key succeeds (as on S3), so retries are safe.
  virtual Status Delete(std::string_view key) = 0;

  // Errors: NotFound.
  virtual Result<std::unique_ptr<ObjectReader>> OpenReader(std::string_view key) = 0;
  virtual Result<std::unique_ptr<ObjectWriter>> OpenWriter(std::string_view key) = 0;

  // Capabilities some stores have, so that callers ask instead of downcasting.

  // A local file that holds exactly the object's bytes, for readers that want a path (FFmpeg
  // reading a video in place); nullopt when the bytes are not in a local file (S3, memory).
  virtual std::optional<std::string> LocalPath(std::string_view key) const { return std::nullopt; }

  // Whether Prefetch brings objects closer (a cache); readers skip prefetching when it does not.
  virtual bool SupportsPrefetch() const { return false; }
  // Brings `key` close ahead of a read (a cache fills its entry). Unimplemented unless
  // SupportsPrefetch(); otherwise the errors of a read.
  virtual Status Prefetch(std::string_view key) {
    return UnimplementedError(uri() + " reads in place: nothing to prefetch");
  }

  // A batch of Puts (PutBatch). By default each of its Puts is the store's Put, at once.
  virtual std::unique_ptr<PutBatch> NewBatch();

  // Creates the bucket this store is rooted at (S3's CreateBucket). Unimplemented for stores
  // without buckets; AlreadyExists when it exists.
  virtual Status CreateBucket() { return UnimplementedError(uri() + " has no bucket to create"); }
};

// "<store uri>/<key>" for messages and metadata: "s3://bucket/a/b", "file:///data/x".
std::string ObjectUri(const ObjectStore& store, std::string_view key);

// InvalidArgument unless `key` follows the rules at the top of this file.
Status ValidateKey(std::string_view key);

// Every object under `prefix`, following page tokens.
Result<std::vector<ObjectInfo>> ListAll(ObjectStore& store, std::string_view prefix);

// Streams `src_key` of `src` into `dst_key` of `dst` in `chunk_bytes` pieces; calls
// `on_bytes(n)` after each piece (for progress). Memory use is one chunk.
Status CopyObject(ObjectStore& src, std::string_view src_key, ObjectStore& dst,
                  std::string_view dst_key, size_t chunk_bytes = 8 << 20,
                  const std::function<void(uint64_t)>& on_bytes = nullptr);

}  // namespace reel::storage
