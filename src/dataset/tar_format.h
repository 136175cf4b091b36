// Internal to tar_writer.cc and tar_reader.cc, not a public contract: the ustar header layout and
// small helpers for its fields and messages, kept in one place so writer and reader agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/strings.h"
#include "dataset/tar.h"

namespace reel::dataset::internal {

constexpr size_t kNameLen = 100;    // the name and linkname fields
constexpr size_t kPrefixLen = 155;  // the ustar prefix field

// Header field offsets (POSIX.1-1988 ustar).
constexpr size_t kOffName = 0, kOffMode = 100, kOffUid = 108, kOffGid = 116, kOffSize = 124,
                 kOffMtime = 136, kOffChksum = 148, kOffType = 156, kOffLinkname = 157,
                 kOffMagic = 257, kOffVersion = 263, kOffDevMajor = 329, kOffDevMinor = 337,
                 kOffPrefix = 345;

// NULs that follow `size` bytes of data up to the next block boundary.
inline uint64_t Padding(uint64_t size) {
  return (kTarBlockSize - size % kTarBlockSize) % kTarBlockSize;
}

// A NUL-terminated (or full-width) string field.
inline std::string_view Field(const char* block, size_t offset, size_t width) {
  const char* start = block + offset;
  const void* nul = std::memchr(start, '\0', width);
  return std::string_view(start, nul ? static_cast<const char*>(nul) - start : width);
}

// A member name or header field as error messages quote it.
inline std::string Printable(std::string_view s) { return PrintableForMessage(s, 300); }

}  // namespace reel::dataset::internal
