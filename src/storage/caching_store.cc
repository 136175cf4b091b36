// CachingStore as an ObjectStore: Open, reads served from entries or filled through the inner
// store (whole, by range, or streamed while the entry is written), and writes that invalidate.
#include "storage/caching_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/hash.h"
#include "base/logging.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "storage/caching_store_entry.h"

namespace reel::storage {

using cache_entry::ChecksumOf;
using cache_entry::DropEntry;
using cache_entry::OpenAndCheck;
using cache_entry::OpenEntry;
using cache_entry::ReadExactly;
using cache_entry::Touch;
using cache_entry::TrailerFor;
using cache_entry::WriteExactly;

namespace {

// Streams a cached entry, checking its checksum as the last bytes are read: a corrupted entry
// ends in DataLoss (and is dropped) rather than in wrong bytes.
class CachedEntryReader : public ObjectReader {
 public:
  CachedEntryReader(std::unique_ptr<OpenEntry> entry, std::function<void()> on_corrupt)
      : entry_(std::move(entry)),
        on_corrupt_(std::move(on_corrupt)),
        hasher_(Hasher::Kind::kXxh3_64) {}
  Result<size_t> Read(char* buffer, size_t n) override {
    size_t take = static_cast<size_t>(std::min<uint64_t>(n, entry_->info.size - position_));
    if (take == 0) return size_t{0};
    if (!ReadExactly(entry_->fd.get(), buffer, take, position_)) {
      return DataLossError("cache entry for '" + entry_->info.key + "' could not be read");
    }
    hasher_.Update(std::string_view(buffer, take));
    position_ += take;
    if (position_ == entry_->info.size && ChecksumOf(hasher_) != entry_->checksum) {
      on_corrupt_();
      return DataLossError("cache entry for '" + entry_->info.key +
                           "' failed verification (a corrupted cache file); it was dropped, "
                           "read the object again");
    }
    return take;
  }
  uint64_t size() const override { return entry_->info.size; }

 private:
  std::unique_ptr<OpenEntry> entry_;
  std::function<void()> on_corrupt_;
  Hasher hasher_;
  uint64_t position_ = 0;
};

// Drops the cached copy once the write is committed, so that a copy cached from the old
// version while the writer was open is not served afterwards.
class InvalidatingWriter : public ObjectWriter {
 public:
  InvalidatingWriter(CachingStore* cache, std::string key, std::unique_ptr<ObjectWriter> inner)
      : cache_(cache), key_(std::move(key)), inner_(std::move(inner)) {}
  Status Write(std::string_view data) override { return inner_->Write(data); }
  Status Close() override {
    Status status = inner_->Close();
    cache_->Invalidate(key_);
    return status;
  }

 private:
  CachingStore* cache_;
  std::string key_;
  std::unique_ptr<ObjectWriter> inner_;
};

}  // namespace

// Streams an object from the inner store while writing it into a new cache entry; the entry is
// published only if every byte arrived and the length matches what the server reported.
class CachingStore::Entry : public ObjectReader {
 public:
  Entry(CachingStore* cache, std::string key, ObjectInfo info, std::unique_ptr<ObjectReader> inner)
      : cache_(cache),
        key_(std::move(key)),
        info_(std::move(info)),
        inner_(std::move(inner)),
        hasher_(Hasher::Kind::kXxh3_64) {}
  ~Entry() override {
    fd_.reset();
    if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  }

  void StartTemp() {
    temp_path_ = cache_->NewTempPath();
    fd_.reset(::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd_.valid()) temp_path_.clear();  // caching is best effort; reading goes on
  }

  Result<size_t> Read(char* buffer, size_t n) override {
    REEL_ASSIGN_OR_RETURN(size_t got, inner_->Read(buffer, n));
    received_ += got;
    if (fd_.valid()) {
      if (got > 0) {
        hasher_.Update(std::string_view(buffer, got));
        if (!WriteExactly(fd_.get(), std::string_view(buffer, got))) {
          Drop();
        } else if (received_ == info_.size) {
          Publish();  // many readers stop after size() bytes, without the final empty Read
        }
      } else {
        Publish();  // short of the reported size: dropped
      }
    } else if (published_ && got > 0) {
      // More bytes than the server reported: the entry just published is not the object.
      cache_->Invalidate(key_);
      published_ = false;
    }
    return got;
  }
  uint64_t size() const override { return inner_->size(); }

 private:
  void Drop() {
    fd_.reset();
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
  }

  void Publish() {
    if (received_ != info_.size || inner_->size() != info_.size) {
      Drop();
      return;
    }
    std::string trailer = TrailerFor(key_, info_, ChecksumOf(hasher_));
    if (!WriteExactly(fd_.get(), trailer) || fd_.Close() != 0) {
      Drop();
      return;
    }
    if (::rename(temp_path_.c_str(), cache_->EntryPath(key_).c_str()) == 0) {
      temp_path_.clear();
      published_ = true;
      cache_->added_since_scan_ += info_.size + trailer.size();
      cache_->EvictIfNeeded();
    }
  }

  CachingStore* cache_;
  std::string key_;
  ObjectInfo info_;
  std::unique_ptr<ObjectReader> inner_;
  Hasher hasher_;
  UniqueFd fd_;
  std::string temp_path_;
  uint64_t received_ = 0;
  bool published_ = false;
};

CachingStore::CachingStore(std::unique_ptr<ObjectStore> inner, CacheOptions options)
    : inner_(std::move(inner)), options_(std::move(options)) {
  namespace_ = Xxh3_128Hex(inner_->uri()).substr(0, 16);
}

CachingStore::~CachingStore() = default;

Result<std::unique_ptr<CachingStore>> CachingStore::Open(std::unique_ptr<ObjectStore> inner,
                                                         CacheOptions options) {
  if (options.directory.empty()) return InvalidArgumentError("cache: directory is empty");
  if (options.max_bytes == 0) return InvalidArgumentError("cache: max_bytes must be positive");
  options.max_object_bytes = std::min(options.max_object_bytes, options.max_bytes);
  std::string path;
  size_t start = 0;
  while (start < options.directory.size()) {
    size_t slash = options.directory.find('/', start + 1);
    if (slash == std::string::npos) slash = options.directory.size();
    path = options.directory.substr(0, slash);
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "cache: create directory '" + path + "'");
    }
    start = slash;
  }
  auto cache =
      std::unique_ptr<CachingStore>(new CachingStore(std::move(inner), std::move(options)));
  // Count what earlier runs left so the bound holds from the first fill.
  cache->added_since_scan_ = cache->DiskUsage();
  return cache;
}

std::string CachingStore::uri() const { return inner_->uri(); }

CacheStats CachingStore::stats() const {
  CacheStats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.evictions = evictions_.load();
  s.corrupt_entries = corrupt_.load();
  return s;
}

Status CachingStore::Prefetch(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  OpenEntry entry;
  if (OpenAndCheck(EntryPath(key), key, &entry)) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(ObjectInfo head, inner_->Head(key));
  if (head.size > options_.max_object_bytes) return Status::Ok();
  return Fill(key, nullptr).status();
}

Result<std::string> CachingStore::Get(std::string_view key, ObjectInfo* info) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  auto cached = ReadEntry(key, info);
  if (cached.ok()) {
    ++hits_;
    return cached;
  }
  return Fill(key, info);
}

Result<std::string> CachingStore::GetRange(std::string_view key, uint64_t offset, uint64_t length) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  OpenEntry entry;
  std::string path = EntryPath(key);
  if (!OpenAndCheck(path, key, &entry)) {
    if (entry.fd.valid()) {  // present but malformed
      ++corrupt_;
      DropEntry(path, entry.fd.get());
    }
    // Bring the whole object in when it fits: shard readers come back for the rest.
    REEL_ASSIGN_OR_RETURN(ObjectInfo head, inner_->Head(key));
    if (head.size > options_.max_object_bytes) return inner_->GetRange(key, offset, length);
    REEL_ASSIGN_OR_RETURN(std::string data, Fill(key, nullptr));
    if (offset > data.size()) {
      return OutOfRangeError("range starts at " + std::to_string(offset) + " past the end of '" +
                             std::string(key) + "' (" + std::to_string(data.size()) + " bytes)");
    }
    return data.substr(offset, length);
  }
  ++hits_;
  Touch(entry.fd.get());
  uint64_t size = entry.info.size;
  if (offset > size) {
    return OutOfRangeError("range starts at " + std::to_string(offset) + " past the end of '" +
                           std::string(key) + "' (" + std::to_string(size) + " bytes)");
  }
  std::string data(std::min(length, size - offset), '\0');
  if (!ReadExactly(entry.fd.get(), data.data(), data.size(), offset)) {
    return DataLossError("cache entry for '" + std::string(key) + "' could not be read");
  }
  return data;
}

Result<ObjectInfo> CachingStore::Head(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  OpenEntry entry;
  std::string path = EntryPath(key);
  if (OpenAndCheck(path, key, &entry)) {
    ++hits_;
    return entry.info;
  }
  if (entry.fd.valid()) {  // present but malformed
    ++corrupt_;
    DropEntry(path, entry.fd.get());
  }
  return inner_->Head(key);
}

Result<ListPage> CachingStore::List(const ListOptions& options) { return inner_->List(options); }

// Writes drop the cached copy after the inner store has changed, so that a read racing with
// the write cannot leave the old version cached behind it.
Status CachingStore::Put(std::string_view key, std::string_view data) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  Status status = inner_->Put(key, data);
  Invalidate(key);
  return status;
}

Status CachingStore::PutIfAbsent(std::string_view key, std::string_view data) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  Status status = inner_->PutIfAbsent(key, data);
  Invalidate(key);
  return status;
}

Status CachingStore::Delete(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  Status status = inner_->Delete(key);
  Invalidate(key);
  return status;
}

Result<std::unique_ptr<ObjectReader>> CachingStore::OpenReader(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  auto entry = std::make_unique<OpenEntry>();
  std::string path = EntryPath(key);
  if (OpenAndCheck(path, key, entry.get())) {
    ++hits_;
    Touch(entry->fd.get());
    int fd = entry->fd.get();  // stays open as long as the reader
    auto on_corrupt = [this, path, fd] {
      ++corrupt_;
      Logger("storage")->warn("cache entry '{}' failed verification while streamed; dropped", path);
      DropEntry(path, fd);
    };
    return std::unique_ptr<ObjectReader>(
        std::make_unique<CachedEntryReader>(std::move(entry), std::move(on_corrupt)));
  }
  if (entry->fd.valid()) {  // present but malformed
    ++corrupt_;
    DropEntry(path, entry->fd.get());
  }
  ++misses_;
  REEL_ASSIGN_OR_RETURN(ObjectInfo head, inner_->Head(key));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<ObjectReader> inner_reader, inner_->OpenReader(key));
  if (head.size > options_.max_object_bytes) return inner_reader;
  auto tee =
      std::make_unique<Entry>(this, std::string(key), std::move(head), std::move(inner_reader));
  tee->StartTemp();
  return std::unique_ptr<ObjectReader>(std::move(tee));
}

Result<std::unique_ptr<ObjectWriter>> CachingStore::OpenWriter(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, inner_->OpenWriter(key));
  return std::unique_ptr<ObjectWriter>(
      std::make_unique<InvalidatingWriter>(this, std::string(key), std::move(writer)));
}

}  // namespace reel::storage
