// The cache entry file format (caching_store_entry.h): writing trailers, opening and checking
// entries, and the exact-length file I/O they need.
#include "storage/caching_store_entry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace reel::storage::cache_entry {
namespace {

// The fixed-size end of the trailer, read first to find the rest of it.
struct Footer {
  uint64_t size;
  uint64_t checksum;  // xxh3-64 of data
  int64_t mtime_ms;
  uint32_t etag_length;
  uint32_t key_length;
  char magic[8];
};
constexpr char kMagic[8] = {'R', 'E', 'E', 'L', 'C', 'A', 'C', '1'};

}  // namespace

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

void Touch(int fd) { ::futimens(fd, nullptr); }

void DropEntry(const std::string& path, int fd) {
  struct stat open_st, path_st;
  if (::fstat(fd, &open_st) != 0 || ::stat(path.c_str(), &path_st) != 0) return;
  if (open_st.st_dev == path_st.st_dev && open_st.st_ino == path_st.st_ino) ::unlink(path.c_str());
}

uint64_t ChecksumOf(Hasher& hasher) {
  return std::strtoull(hasher.FinishHex().c_str(), nullptr, 16);
}

}  // namespace reel::storage::cache_entry
