#include "registry/chunk_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/files.h"
#include "base/hash.h"
#include "registry/weight_store.h"

namespace reel::registry {
namespace {

namespace fs = std::filesystem;

constexpr size_t kFooterBytes = 8;

std::string FooterBytes(uint64_t hash) {
  std::string out(kFooterBytes, '\0');
  for (size_t i = 0; i < kFooterBytes; ++i) out[i] = static_cast<char>(hash >> (8 * i));
  return out;
}

uint64_t Footer(std::string_view file) {
  uint64_t hash = 0;
  for (size_t i = 0; i < kFooterBytes; ++i) {
    hash |= uint64_t{static_cast<uint8_t>(file[file.size() - kFooterBytes + i])} << (8 * i);
  }
  return hash;
}

struct FolderFile {
  fs::path path;
  uint64_t bytes = 0;
  fs::file_time_type written;
};

// The folder's chunk files, newest first. Files another process removes meanwhile are skipped.
std::vector<FolderFile> FolderFiles(const std::string& folder) {
  std::vector<FolderFile> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    if (!IsChunkAddress(e.path().filename().string())) continue;  // a writer's temp file
    FolderFile f{e.path(), 0, {}};
    f.bytes = e.file_size(ec);
    f.bytes -= std::min<uint64_t>(f.bytes, kFooterBytes);  // the budget counts chunk bytes
    if (!ec) f.written = e.last_write_time(ec);
    if (!ec) files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(),
            [](const FolderFile& a, const FolderFile& b) { return a.written > b.written; });
  return files;
}

// A whole file mapped read-only and its pages populated in one call; null when it cannot be (or is
// empty, or larger than `limit`).
ChunkBytes MapFile(const std::string& path, uint64_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* data = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && static_cast<uint64_t>(st.st_size) <= limit) {
    data = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE,
                  fd, 0);
  }
  ::close(fd);
  if (data == MAP_FAILED) return nullptr;
  struct Mapped {
    std::string_view view;
    ~Mapped() { ::munmap(const_cast<char*>(view.data()), view.size()); }
  };
  auto mapped = std::make_shared<Mapped>();
  mapped->view = std::string_view(static_cast<const char*>(data), static_cast<size_t>(st.st_size));
  return ChunkBytes(mapped, &mapped->view);
}

}  // namespace

ChunkBytes OwnedChunkBytes(std::string bytes) {
  struct Owned {
    std::string bytes;
    std::string_view view;
  };
  auto owned = std::make_shared<Owned>();
  owned->bytes = std::move(bytes);
  owned->view = owned->bytes;
  return ChunkBytes(owned, &owned->view);
}

ChunkBytes ChunkCache::Find(const std::string& address) {
  if (ChunkBytes hit = FindInMemory(address)) return hit;
  return folder_.empty() ? nullptr : FindInFolder(address);
}

ChunkBytes ChunkCache::FindInMemory(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(address);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

// A folder file holds a chunk's bytes and then their xxh3 (8 bytes, little-endian). It is a hit
// only when the bytes still match it; one that does not (damaged since) is removed, best effort.
// xxh3 and not SHA-256: the bytes were checked against their address when they entered the cache
// (pushed bytes are hashed to make their address), and hashing two 4 MiB bases with SHA-256 cost a
// third of a push. Files are written under temp names and renamed whole (base/files.h), so one
// under its address is never half written.
ChunkBytes ChunkCache::FindInFolder(const std::string& address) {
  if (!IsChunkAddress(address)) return nullptr;  // only addresses name files in the folder
  const std::string path = (fs::path(folder_) / address).string();
  ChunkBytes file = MapFile(path, capacity_ + kFooterBytes);
  if (file == nullptr) return nullptr;
  if (file->size() <= kFooterBytes ||
      Xxh3_64(file->substr(0, file->size() - kFooterBytes)) != Footer(*file)) {
    std::error_code ec;
    fs::remove(path, ec);
    return nullptr;
  }
  struct Trimmed {  // the file's bytes without their footer, holding the mapping
    ChunkBytes file;
    std::string_view view;
  };
  auto trimmed = std::make_shared<Trimmed>();
  trimmed->view = file->substr(0, file->size() - kFooterBytes);
  trimmed->file = std::move(file);
  ChunkBytes bytes(trimmed, &trimmed->view);
  Keep(address, bytes, /*unsaved=*/false);
  return bytes;
}

void ChunkCache::Insert(const std::string& address, std::string_view raw) {
  if (raw.size() > capacity_ || FindInMemory(address) != nullptr) return;  // a hit: most recent
  // The copy is made outside the lock: pushes insert whole versions, 4 MiB at a time.
  Keep(address, OwnedChunkBytes(std::string(raw)), /*unsaved=*/true);
}

void ChunkCache::Keep(const std::string& address, ChunkBytes bytes, bool unsaved) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(address) != 0) return;  // another thread kept it meanwhile
  EvictBeyond(capacity_ - bytes->size());
  bytes_ += bytes->size();
  lru_.emplace_front(address, std::move(bytes));
  index_.emplace(address, lru_.begin());
  if (unsaved && !folder_.empty()) unsaved_.insert(address);
}

Status ChunkCache::Persist() {
  if (folder_.empty()) return Status::Ok();
  std::vector<Entry> newest_first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : lru_) {
      if (unsaved_.count(e.first) != 0) newest_first.push_back(e);
    }
    unsaved_.clear();
  }
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (ec) return ErrnoToStatus(ec.value(), "chunk cache folder " + folder_);
  // Oldest first, so that the newest get the latest write times and survive the trim longest.
  // Another process may write the same chunk at once: whichever rename lands, the bytes agree.
  Status first_error;
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) {
    const fs::path path = fs::path(folder_) / it->first;
    if (fs::exists(path, ec)) {  // another process's: now as recent as this one's
      fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
      continue;
    }
    const std::string footer = FooterBytes(Xxh3_64(*it->second));
    Status written = WriteFileAtomically(path.string(), {*it->second, footer});
    if (!written.ok() && !fs::exists(path, ec) && first_error.ok()) first_error = written;
  }
  uint64_t kept = 0;
  for (const FolderFile& f : FolderFiles(folder_)) {
    kept += f.bytes;
    if (kept > capacity_) fs::remove(f.path, ec);  // another process may have removed it first
  }
  return first_error;
}

void ChunkCache::EvictBeyond(uint64_t budget) {
  while (bytes_ > budget && !lru_.empty()) {
    bytes_ -= lru_.back().second->size();
    unsaved_.erase(lru_.back().first);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ChunkCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace reel::registry
