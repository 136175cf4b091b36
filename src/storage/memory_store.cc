#include "storage/memory_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "storage/listing.h"

namespace reel::storage {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status Missing(std::string_view key) {
  return NotFoundError("no such key '" + std::string(key) + "'");
}

class MemoryReader : public ObjectReader {
 public:
  explicit MemoryReader(std::shared_ptr<const std::string> data) : data_(std::move(data)) {}
  Result<size_t> Read(char* buffer, size_t n) override {
    size_t take = std::min(n, data_->size() - position_);
    // Bytes, not a C string: no terminator is wanted.
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result)
    std::memcpy(buffer, data_->data() + position_, take);
    position_ += take;
    return take;
  }
  uint64_t size() const override { return data_->size(); }

 private:
  std::shared_ptr<const std::string> data_;
  size_t position_ = 0;
};

class MemoryWriter : public ObjectWriter {
 public:
  MemoryWriter(MemoryStore* store, std::string key) : store_(store), key_(std::move(key)) {}
  Status Write(std::string_view data) override {
    if (closed_) return FailedPreconditionError("write to a closed writer for '" + key_ + "'");
    buffer_.append(data);
    return Status::Ok();
  }
  Status Close() override {
    if (closed_) return FailedPreconditionError("writer for '" + key_ + "' closed twice");
    closed_ = true;
    return store_->Put(key_, buffer_);
  }

 private:
  MemoryStore* store_;
  std::string key_;
  std::string buffer_;
  bool closed_ = false;
};

}  // namespace

MemoryStore::MemoryStore(std::string name) : name_(std::move(name)) {}

Status MemoryStore::PutLocked(std::string_view key, std::string_view data) {
  Object object;
  object.data = std::make_shared<const std::string>(data);
  object.info.key = std::string(key);
  object.info.size = data.size();
  object.info.etag = "v" + std::to_string(++version_);
  object.info.mtime_ms = NowMs();
  objects_.insert_or_assign(std::string(key), std::move(object));
  return Status::Ok();
}

Status MemoryStore::Put(std::string_view key, std::string_view data) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  return PutLocked(key, data);
}

Status MemoryStore::PutIfAbsent(std::string_view key, std::string_view data) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  if (objects_.find(key) != objects_.end()) {
    return AlreadyExistsError("key '" + std::string(key) + "' already exists");
  }
  return PutLocked(key, data);
}

Result<std::string> MemoryStore::Get(std::string_view key, ObjectInfo* info) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Missing(key);
  if (info) *info = it->second.info;
  return *it->second.data;
}

Result<std::string> MemoryStore::GetRange(std::string_view key, uint64_t offset, uint64_t length) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Missing(key);
  const std::string& data = *it->second.data;
  if (offset > data.size()) {
    return OutOfRangeError("range starts at " + std::to_string(offset) + " past the end of '" +
                           std::string(key) + "' (" + std::to_string(data.size()) + " bytes)");
  }
  return data.substr(offset, length);
}

Result<ObjectInfo> MemoryStore::Head(std::string_view key) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Missing(key);
  return it->second.info;
}

Result<ListPage> MemoryStore::List(const ListOptions& options) {
  ++requests_;
  std::vector<ObjectInfo> sorted;
  {
    std::lock_guard lock(mu_);
    // Start at the page token: earlier keys cannot be on this page.
    const std::string& from = std::max(options.prefix, options.page_token);
    for (auto it = objects_.lower_bound(from); it != objects_.end(); ++it) {
      if (it->first.compare(0, options.prefix.size(), options.prefix) != 0) break;
      sorted.push_back(it->second.info);
    }
  }
  return PageFromSortedObjects(sorted, options);
}

Status MemoryStore::Delete(std::string_view key) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  objects_.erase(std::string(key));
  return Status::Ok();
}

Result<std::unique_ptr<ObjectReader>> MemoryStore::OpenReader(std::string_view key) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Missing(key);
  return std::unique_ptr<ObjectReader>(std::make_unique<MemoryReader>(it->second.data));
}

Result<std::unique_ptr<ObjectWriter>> MemoryStore::OpenWriter(std::string_view key) {
  ++requests_;
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  return std::unique_ptr<ObjectWriter>(std::make_unique<MemoryWriter>(this, std::string(key)));
}

}  // namespace reel::storage
