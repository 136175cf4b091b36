// Opens the ObjectStore a URI names; the one place that knows every kind of store.
//   /abs/path, rel/path, file:///abs/path   LocalStore rooted there
//   s3://bucket[/prefix]                    S3Store configured from the AWS_* variables
//   mem://name                              a MemoryStore shared by every open of that name in
//                                           this process (for tests and dry runs)
// With a cache directory set (StoreOpenOptions or REEL_CACHE_DIR), remote stores are wrapped in
// a CachingStore; local ones never are.
// Thread-safety: OpenStore may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "storage/object_store.h"

namespace reel::storage {

struct StoreOpenOptions {
  std::string cache_directory;   // "" = $REEL_CACHE_DIR, or no cache when that is unset too
  uint64_t cache_max_bytes = 0;  // 0 = $REEL_CACHE_MAX_GB GiB, or 10 GiB
};

// Errors: InvalidArgument (bad URI, unknown scheme, bad S3 settings), and Open errors of the
// store itself.
Result<std::unique_ptr<ObjectStore>> OpenStore(std::string_view uri,
                                               const StoreOpenOptions& options = {});

// A URI naming one object, split into its store and key:
//   s3://bucket/a/b.tar -> (s3://bucket, "a/b.tar"); /data/x.bin -> (file:///, "data/x.bin").
struct ObjectLocation {
  std::unique_ptr<ObjectStore> store;
  std::string key;  // may be "" when the URI names a bucket or "/" itself (listing only)
};
Result<ObjectLocation> OpenObjectUri(std::string_view uri, const StoreOpenOptions& options = {});

}  // namespace reel::storage
