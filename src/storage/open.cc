#include "storage/open.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "base/uri.h"
#include "storage/caching_store.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/s3_store.h"

namespace reel::storage {
namespace {

// MemoryStores outlive their openers so that mem://name means the same data everywhere.
class SharedMemoryStore : public ObjectStore {
 public:
  explicit SharedMemoryStore(std::shared_ptr<MemoryStore> store) : store_(std::move(store)) {}
  std::string uri() const override { return store_->uri(); }
  Status Put(std::string_view k, std::string_view d) override { return store_->Put(k, d); }
  Status PutIfAbsent(std::string_view k, std::string_view d) override {
    return store_->PutIfAbsent(k, d);
  }
  Result<std::string> Get(std::string_view k, ObjectInfo* i) override { return store_->Get(k, i); }
  Result<std::string> GetRange(std::string_view k, uint64_t o, uint64_t l) override {
    return store_->GetRange(k, o, l);
  }
  Result<ObjectInfo> Head(std::string_view k) override { return store_->Head(k); }
  Result<ListPage> List(const ListOptions& o) override { return store_->List(o); }
  Status Delete(std::string_view k) override { return store_->Delete(k); }
  Result<std::unique_ptr<ObjectReader>> OpenReader(std::string_view k) override {
    return store_->OpenReader(k);
  }
  Result<std::unique_ptr<ObjectWriter>> OpenWriter(std::string_view k) override {
    return store_->OpenWriter(k);
  }

 private:
  std::shared_ptr<MemoryStore> store_;
};

std::shared_ptr<MemoryStore> NamedMemoryStore(const std::string& name) {
  static std::mutex mu;
  static auto* stores = new std::map<std::string, std::shared_ptr<MemoryStore>>;
  std::lock_guard lock(mu);
  auto& store = (*stores)[name];
  if (!store) store = std::make_shared<MemoryStore>(name);
  return store;
}

Result<std::unique_ptr<ObjectStore>> MaybeCached(std::unique_ptr<ObjectStore> store,
                                                 const StoreOpenOptions& options) {
  std::string directory = options.cache_directory;
  if (directory.empty()) {
    const char* env = std::getenv("REEL_CACHE_DIR");
    if (env) directory = env;
  }
  if (directory.empty()) return store;
  CacheOptions cache;
  cache.directory = directory;
  cache.max_bytes = options.cache_max_bytes;
  if (cache.max_bytes == 0) {
    const char* env = std::getenv("REEL_CACHE_MAX_GB");
    double gb = env ? std::atof(env) : 10.0;
    if (gb <= 0)
      return InvalidArgumentError(std::string("REEL_CACHE_MAX_GB='") + env +
                                  "': expected a positive number");
    cache.max_bytes = static_cast<uint64_t>(gb * (1ull << 30));
  }
  REEL_ASSIGN_OR_RETURN(auto cached, CachingStore::Open(std::move(store), cache));
  return std::unique_ptr<ObjectStore>(std::move(cached));
}

Result<std::unique_ptr<ObjectStore>> OpenParsed(const Uri& uri, const StoreOpenOptions& options) {
  if (uri.scheme == "file") {
    REEL_ASSIGN_OR_RETURN(auto local, LocalStore::Open(uri.path));
    return std::unique_ptr<ObjectStore>(std::move(local));
  }
  if (uri.scheme == "mem") {
    return std::unique_ptr<ObjectStore>(
        std::make_unique<SharedMemoryStore>(NamedMemoryStore(uri.authority)));
  }
  if (uri.scheme == "s3") {
    REEL_ASSIGN_OR_RETURN(S3Options s3_options, S3Options::FromEnvironment());
    REEL_ASSIGN_OR_RETURN(auto s3, S3Store::Open(uri.authority, uri.path, s3_options));
    return MaybeCached(std::move(s3), options);
  }
  return InvalidArgumentError("unsupported storage scheme '" + uri.scheme + "' in '" +
                              uri.ToString() + "' (expected file, s3 or mem)");
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenStore(std::string_view text,
                                               const StoreOpenOptions& options) {
  REEL_ASSIGN_OR_RETURN(Uri uri, ParseUri(text));
  return OpenParsed(uri, options);
}

Result<ObjectLocation> OpenObjectUri(std::string_view text, const StoreOpenOptions& options) {
  REEL_ASSIGN_OR_RETURN(Uri uri, ParseUri(text));
  ObjectLocation location;
  if (uri.scheme == "file") {
    // The file system root is the store, so any path is a key and parents get created.
    location.key = uri.path.size() > 1 ? uri.path.substr(1) : "";
    uri.path = "/";
  } else {
    location.key = uri.path;
    uri.path.clear();
  }
  if (!location.key.empty() && location.key.back() == '/') location.key.pop_back();
  REEL_ASSIGN_OR_RETURN(location.store, OpenParsed(uri, options));
  return location;
}

}  // namespace reel::storage
