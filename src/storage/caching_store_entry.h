// Internal to caching_store.cc and caching_store_disk.cc, not a public contract: the file format
// of one cache entry, and the file operations on entries that both need.
//
// An entry file is the object's bytes followed by a trailer, so entries can be written while
// streaming and ranges read with one pread at the object's own offsets:
//   [data: size bytes][etag][key][footer: size, xxh3-64 of data, mtime, lengths, magic]
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/hash.h"
#include "base/unique_fd.h"
#include "storage/object_store.h"

namespace reel::storage::cache_entry {

// pread until `n` bytes at `offset` are in; false on an error or the end of the file.
bool ReadExactly(int fd, char* buffer, size_t n, uint64_t offset);
// write until all of `data` is out; false on an error.
bool WriteExactly(int fd, std::string_view data);

// What follows the data in the entry for `key`.
std::string TrailerFor(std::string_view key, const ObjectInfo& info, uint64_t checksum);

// An open entry whose trailer matched the key and the file length.
struct OpenEntry {
  UniqueFd fd;
  ObjectInfo info;
  uint64_t checksum = 0;
};

// Opens and checks an entry's trailer; false when absent or malformed (entry->fd stays open when
// the file exists but is malformed).
bool OpenAndCheck(const std::string& path, std::string_view key, OpenEntry* entry);

// Marks an entry recently used, for LRU eviction shared by every process.
void Touch(int fd);

// Removes the bad entry open as `fd`, unless another process has already replaced it with a
// new (good) one under the same name.
void DropEntry(const std::string& path, int fd);

// The xxh3-64 that `hasher` (of kind kXxh3_64) computed, as the number the footer stores.
uint64_t ChecksumOf(Hasher& hasher);

}  // namespace reel::storage::cache_entry
