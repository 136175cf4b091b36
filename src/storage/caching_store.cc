#include "storage/caching_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "base/hash.h"
#include "base/logging.h"
#include "base/unique_fd.h"

namespace reel::storage {
namespace {

// An entry file is the object's bytes followed by a trailer, so entries can be written while
// streaming and ranges read with one pread at the object's own offsets:
//   [data: size bytes][etag][key][Footer]
struct Footer {
  uint64_t size;
  uint64_t checksum;  // xxh3-64 of data
  int64_t mtime_ms;
  uint32_t etag_length;
  uint32_t key_length;
  char magic[8];
};
constexpr char kMagic[8] = {'R', 'E', 'E', 'L', 'C', 'A', 'C', '1'};
constexpr std::string_view kTempPrefix = ".tmp-";

bool ReadExactly(int fd, char* buffer, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, buffer + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

bool WriteExactly(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string TrailerFor(std::string_view key, const ObjectInfo& info, uint64_t checksum) {
  Footer footer{};
  footer.size = info.size;
  footer.checksum = checksum;
  footer.mtime_ms = info.mtime_ms;
  footer.etag_length = static_cast<uint32_t>(info.etag.size());
  footer.key_length = static_cast<uint32_t>(key.size());
  std::memcpy(footer.magic, kMagic, sizeof kMagic);
  std::string trailer = info.etag + std::string(key);
  trailer.append(reinterpret_cast<const char*>(&footer), sizeof footer);
  return trailer;
}

// An open entry whose trailer matched the key and the file length.
struct OpenEntry {
  UniqueFd fd;
  ObjectInfo info;
  uint64_t checksum = 0;
};

// Opens and checks an entry's trailer; false when absent or malformed.
bool OpenAndCheck(const std::string& path, std::string_view key, OpenEntry* entry) {
  entry->fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!entry->fd.valid()) return false;
  struct stat st;
  if (::fstat(entry->fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Footer))
    return false;
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  Footer footer;
  if (!ReadExactly(entry->fd.get(), reinterpret_cast<char*>(&footer), sizeof footer,
                   file_size - sizeof footer)) {
    return false;
  }
  if (std::memcmp(footer.magic, kMagic, sizeof kMagic) != 0) return false;
  uint64_t expected = footer.size + footer.etag_length + footer.key_length + sizeof footer;
  if (expected != file_size || footer.key_length != key.size()) return false;
  std::string names(footer.etag_length + footer.key_length, '\0');
  if (!ReadExactly(entry->fd.get(), names.data(), names.size(), footer.size)) return false;
  if (std::string_view(names).substr(footer.etag_length) != key) return false;  // hash collision
  entry->info.key = std::string(key);
  entry->info.size = footer.size;
  entry->info.etag = names.substr(0, footer.etag_length);
  entry->info.mtime_ms = footer.mtime_ms;
  entry->checksum = footer.checksum;
  return true;
}

// Marks an entry recently used, for LRU eviction shared by every process.
void Touch(int fd) { ::futimens(fd, nullptr); }

// Removes the bad entry open as `fd`, unless another process has already replaced it with a
// new (good) one under the same name.
void DropEntry(const std::string& path, int fd) {
  struct stat open_st, path_st;
  if (::fstat(fd, &open_st) != 0 || ::stat(path.c_str(), &path_st) != 0) return;
  if (open_st.st_dev == path_st.st_dev && open_st.st_ino == path_st.st_ino) ::unlink(path.c_str());
}

uint64_t ChecksumOf(Hasher& hasher) {
  return std::strtoull(hasher.FinishHex().c_str(), nullptr, 16);
}

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

namespace {

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

std::string CachingStore::EntryPath(std::string_view key) const {
  return options_.directory + "/" + namespace_ + "-" + Xxh3_128Hex(key);
}

std::string CachingStore::NewTempPath() const {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return options_.directory + "/" + std::string(kTempPrefix) + std::to_string(::getpid()) + "-" +
         std::to_string(rng());
}

void CachingStore::Invalidate(std::string_view key) { ::unlink(EntryPath(key).c_str()); }

CacheStats CachingStore::stats() const {
  CacheStats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.evictions = evictions_.load();
  s.corrupt_entries = corrupt_.load();
  return s;
}

Result<std::string> CachingStore::ReadEntry(std::string_view key, ObjectInfo* info) {
  std::string path = EntryPath(key);
  OpenEntry entry;
  if (!OpenAndCheck(path, key, &entry)) {
    if (entry.fd.valid()) {  // present but malformed: a torn or foreign file
      ++corrupt_;
      DropEntry(path, entry.fd.get());
    }
    return NotFoundError("not cached");
  }
  std::string data(entry.info.size, '\0');
  if (!ReadExactly(entry.fd.get(), data.data(), data.size(), 0) ||
      Xxh3_64(data) != entry.checksum) {
    ++corrupt_;
    Logger("storage")->warn("cache entry for '{}' failed verification; fetching again", key);
    DropEntry(path, entry.fd.get());
    return NotFoundError("not cached");
  }
  Touch(entry.fd.get());
  if (info) *info = entry.info;
  return data;
}

void CachingStore::StoreEntry(std::string_view key, std::string_view data, const ObjectInfo& info) {
  std::string temp = NewTempPath();
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return;  // caching is best effort: the caller already has the bytes
  std::string trailer = TrailerFor(key, info, Xxh3_64(data));
  bool ok = WriteExactly(fd.get(), data) && WriteExactly(fd.get(), trailer);
  ok = (fd.Close() == 0) && ok;
  if (!ok || ::rename(temp.c_str(), EntryPath(key).c_str()) != 0) {
    ::unlink(temp.c_str());
    return;
  }
  // Count what the file takes, trailer included, as the scans in EvictIfNeeded do.
  added_since_scan_ += data.size() + trailer.size();
  EvictIfNeeded();
}

uint64_t CachingStore::DiskUsage() const {
  uint64_t total = 0;
  DIR* dir = ::opendir(options_.directory.c_str());
  if (!dir) return 0;
  while (struct dirent* e = ::readdir(dir)) {
    struct stat st;
    if (e->d_name[0] == '.' || ::fstatat(::dirfd(dir), e->d_name, &st, 0) != 0) continue;
    if (S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
  }
  ::closedir(dir);
  return total;
}

void CachingStore::EvictIfNeeded() {
  if (added_since_scan_.load() <= options_.max_bytes) return;
  // One evictor at a time across processes; others carry on reading and filling.
  std::string lock_path = options_.directory + "/.lock";
  UniqueFd lock_fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock_fd.valid() || ::flock(lock_fd.get(), LOCK_EX) != 0) return;
  struct Candidate {
    std::string name;
    uint64_t size;
    int64_t mtime_ns;
  };
  std::vector<Candidate> entries;
  uint64_t total = 0;
  if (DIR* dir = ::opendir(options_.directory.c_str())) {
    while (struct dirent* e = ::readdir(dir)) {
      struct stat st;
      if (e->d_name[0] == '.' || ::fstatat(::dirfd(dir), e->d_name, &st, 0) != 0) continue;
      if (!S_ISREG(st.st_mode)) continue;
      entries.push_back({e->d_name, static_cast<uint64_t>(st.st_size),
                         st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec});
      total += static_cast<uint64_t>(st.st_size);
    }
    ::closedir(dir);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Candidate& a, const Candidate& b) { return a.mtime_ns < b.mtime_ns; });
  // Evict to 90% so that every fill does not trigger another scan.
  uint64_t target = options_.max_bytes - options_.max_bytes / 10;
  for (const Candidate& c : entries) {
    if (total <= target) break;
    if (::unlink((options_.directory + "/" + c.name).c_str()) == 0) {
      total -= c.size;
      ++evictions_;
    }
  }
  added_since_scan_ = total;
  ::flock(lock_fd.get(), LOCK_UN);
}

Result<std::string> CachingStore::Fill(std::string_view key, ObjectInfo* info) {
  {
    std::unique_lock lock(filling_mu_);
    filling_cv_.wait(lock, [&] { return filling_.find(key) == filling_.end(); });
    // Another thread may just have cached it.
    lock.unlock();
    auto cached = ReadEntry(key, info);
    if (cached.ok()) {
      ++hits_;
      return cached;
    }
    lock.lock();
    if (filling_.find(key) != filling_.end()) {
      lock.unlock();
      return Fill(key, info);  // lost the race to start the fetch: wait for that one
    }
    filling_.emplace(key);
  }
  auto done = [&] {
    std::lock_guard lock(filling_mu_);
    filling_.erase(filling_.find(key));
    filling_cv_.notify_all();
  };
  ++misses_;
  ObjectInfo fetched;
  auto data = inner_->Get(key, &fetched);
  if (!data.ok()) {
    done();
    return data.status();
  }
  if (data->size() != fetched.size) {
    done();
    return DataLossError(inner_->uri() + "/" + std::string(key) + ": received " +
                         std::to_string(data->size()) + " bytes but the store reported " +
                         std::to_string(fetched.size));
  }
  if (data->size() <= options_.max_object_bytes) StoreEntry(key, *data, fetched);
  done();
  if (info) *info = fetched;
  return data;
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
