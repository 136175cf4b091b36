// CachingStore's cache directory: entry paths, verified reads and atomic stores of entries,
// single-flight fills from the inner store, and LRU eviction shared by every process.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/hash.h"
#include "base/logging.h"
#include "base/status.h"
#include "base/sync_point.h"
#include "base/unique_fd.h"
#include "storage/caching_store.h"
#include "storage/caching_store_entry.h"

namespace reel::storage {

using cache_entry::DropEntry;
using cache_entry::OpenAndCheck;
using cache_entry::OpenEntry;
using cache_entry::ReadExactly;
using cache_entry::Touch;
using cache_entry::TrailerFor;
using cache_entry::WriteExactly;

namespace {

constexpr std::string_view kCacheTempPrefix = ".tmp-";

}  // namespace

std::string CachingStore::EntryPath(std::string_view key) const {
  return options_.directory + "/" + namespace_ + "-" + Xxh3_128Hex(key);
}

std::string CachingStore::NewTempPath() const {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return options_.directory + "/" + std::string(kCacheTempPrefix) + std::to_string(::getpid()) +
         "-" + std::to_string(rng());
}

void CachingStore::Invalidate(std::string_view key) { ::unlink(EntryPath(key).c_str()); }

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
  while (true) {
    std::unique_lock lock(filling_mu_);
    filling_cv_.wait(lock, [&] { return filling_.find(key) == filling_.end(); });
    const uint64_t fills_seen = fills_done_;
    lock.unlock();
    // Another thread may just have cached it.
    auto cached = ReadEntry(key, info);
    if (cached.ok()) {
      ++hits_;
      return cached;
    }
    REEL_SYNC_POINT("CachingStore::Fill:Missed");
    lock.lock();
    // A fill that started, or even finished, since the read may have brought it: look again
    // rather than fetch it a second time.
    if (filling_.find(key) != filling_.end() || fills_done_ != fills_seen) continue;
    filling_.emplace(key);
    break;
  }
  auto done = [&] {
    std::lock_guard lock(filling_mu_);
    filling_.erase(filling_.find(key));
    ++fills_done_;
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

}  // namespace reel::storage
