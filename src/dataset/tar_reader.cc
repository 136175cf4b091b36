// TarReader and ListTar: parsing ustar, pax, GNU and v7 headers, from memory or streaming from an
// ObjectReader.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "dataset/tar.h"
#include "dataset/tar_format.h"
#include "storage/object_store.h"

namespace reel::dataset {

// The ustar layout shared with the other half (tar_format.h), by its short names.
using internal::Field, internal::kNameLen, internal::kOffChksum, internal::kOffGid,
    internal::kOffLinkname, internal::kOffMagic, internal::kOffMode, internal::kOffMtime,
    internal::kOffName, internal::kOffPrefix, internal::kOffSize, internal::kOffType,
    internal::kOffUid, internal::kPrefixLen, internal::Padding, internal::Printable;

namespace {

constexpr uint64_t kMaxExtendedHeaderBytes = 16 << 20;  // pax / GNU long-name data

// An octal (optionally space/NUL padded) or GNU base-256 numeric field. Negative values (base-256
// with a leading 0xff) are allowed only when `allow_negative`.
bool ParseNumber(const char* field, size_t width, bool allow_negative, int64_t* signed_out,
                 uint64_t* out) {
  auto first = static_cast<unsigned char>(field[0]);
  if (first & 0x80) {
    if (first == 0xff) {
      if (!allow_negative) return false;
      // Two's complement over the field; only the last 8 bytes may carry magnitude.
      for (size_t i = 0; i + 8 < width; ++i) {
        if (static_cast<unsigned char>(field[i]) != 0xff) return false;
      }
      uint64_t v = 0;
      for (size_t i = width - 8; i < width; ++i)
        v = (v << 8) | static_cast<unsigned char>(field[i]);
      *signed_out = static_cast<int64_t>(v);
      *out = 0;
      return true;
    }
    if (first != 0x80) return false;
    uint64_t v = 0;
    for (size_t i = 1; i < width; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | static_cast<unsigned char>(field[i]);
    }
    *out = v;
    *signed_out = v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    return true;
  }
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 61) return false;
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  for (; i < width; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return false;
  }
  *out = v;
  *signed_out = v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
  return true;
}

// A numeric field that may not be negative.
bool ParseUnsigned(const char* field, size_t width, uint64_t* out) {
  int64_t ignored = 0;
  return ParseNumber(field, width, false, &ignored, out);
}

bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != v) return false;
    v = next;
  }
  *out = v;
  return true;
}

// pax "mtime": "-?digits(.digits)?"; the fraction is dropped.
bool ParsePaxTime(std::string_view s, int64_t* out) {
  bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  if (dot != std::string_view::npos) {
    for (char c : s.substr(dot + 1)) {
      if (c < '0' || c > '9') return false;
    }
  }
  uint64_t v = 0;
  if (!ParseDecimal(whole, &v) || v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// Parses "len key=value\n" records into `into`; an empty value removes the key.
bool ParsePaxRecords(std::string_view data, std::map<std::string, std::string>* into,
                     std::string* error) {
  while (!data.empty()) {
    // Some writers pad the data with NULs.
    if (data[0] == '\0') break;
    size_t space = data.find(' ');
    uint64_t len = 0;
    if (space == std::string_view::npos || !ParseDecimal(data.substr(0, space), &len) ||
        len <= space + 1 || len > data.size() || data[len - 1] != '\n') {
      *error = "malformed pax record '" + Printable(data.substr(0, 64)) + "'";
      return false;
    }
    std::string_view record = data.substr(space + 1, len - space - 2);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      *error = "pax record without key=value: '" + Printable(record.substr(0, 64)) + "'";
      return false;
    }
    std::string key(record.substr(0, eq));
    std::string_view value = record.substr(eq + 1);
    if (value.empty()) {
      into->erase(key);
    } else {
      (*into)[key] = std::string(value);
    }
    data.remove_prefix(len);
  }
  return true;
}

}  // namespace

namespace internal {
class TarSource {
 public:
  virtual ~TarSource() = default;
  // Up to n bytes; 0 at the end.
  virtual Result<size_t> Read(char* out, size_t n) = 0;
  // Bytes left in the archive.
  virtual uint64_t remaining() const = 0;
};
}  // namespace internal

namespace {

class MemorySource : public internal::TarSource {
 public:
  explicit MemorySource(std::string_view data) : data_(data) {}
  Result<size_t> Read(char* out, size_t n) override {
    size_t take = std::min(n, data_.size() - position_);
    if (take > 0) std::memcpy(out, data_.data() + position_, take);
    position_ += take;
    return take;
  }
  uint64_t remaining() const override { return data_.size() - position_; }

 private:
  std::string_view data_;
  size_t position_ = 0;
};

class ObjectSource : public internal::TarSource {
 public:
  ObjectSource(storage::ObjectReader* reader, size_t buffer_bytes)
      : reader_(reader), buffer_(std::max<size_t>(buffer_bytes, kTarBlockSize), '\0') {}
  Result<size_t> Read(char* out, size_t n) override {
    if (begin_ == end_) {
      if (n >= buffer_.size()) {
        REEL_ASSIGN_OR_RETURN(size_t got, reader_->Read(out, n));
        consumed_ += got;
        return got;
      }
      REEL_ASSIGN_OR_RETURN(size_t got, reader_->Read(buffer_.data(), buffer_.size()));
      begin_ = 0;
      end_ = got;
      if (got == 0) return size_t{0};
    }
    size_t take = std::min(n, end_ - begin_);
    std::memcpy(out, buffer_.data() + begin_, take);
    begin_ += take;
    consumed_ += take;
    return take;
  }
  uint64_t remaining() const override {
    uint64_t size = reader_->size();
    return size > consumed_ ? size - consumed_ : 0;
  }

 private:
  storage::ObjectReader* reader_;
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace

TarReader::TarReader(std::string_view archive, std::string what)
    : source_(std::make_unique<MemorySource>(archive)), what_(std::move(what)) {}

TarReader::TarReader(storage::ObjectReader* reader, std::string what, size_t buffer_bytes)
    : source_(std::make_unique<ObjectSource>(reader, buffer_bytes)), what_(std::move(what)) {}

TarReader::~TarReader() = default;

Status TarReader::Fail(Status status) {
  broken_ = status;
  return status;
}

Result<size_t> TarReader::ReadSome(char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    Result<size_t> got = source_->Read(out + done, n - done);
    if (!got.ok()) return got.status().WithContext(what_);
    if (*got == 0) break;
    done += *got;
  }
  offset_ += done;
  return done;
}

Status TarReader::ReadExact(char* out, size_t n, std::string_view purpose) {
  size_t done = 0;
  while (done < n) {
    Result<size_t> got = source_->Read(out + done, n - done);
    if (!got.ok()) return got.status().WithContext(what_);
    if (*got == 0) {
      return DataLossError(what_ + ": truncated archive: it ends at offset " +
                           std::to_string(offset_ + done) + " inside " + std::string(purpose));
    }
    done += *got;
  }
  offset_ += n;
  return Status::Ok();
}

Status TarReader::Skip(uint64_t n, std::string_view purpose) {
  char scratch[64 << 10];
  while (n > 0) {
    size_t step = static_cast<size_t>(std::min<uint64_t>(n, sizeof(scratch)));
    REEL_RETURN_IF_ERROR(ReadExact(scratch, step, purpose));
    n -= step;
  }
  return Status::Ok();
}

// One member per call: header blocks until the member's own (pax and GNU extended headers before
// it are gathered into `pending`), then its data. Every error also breaks the reader.
Result<bool> TarReader::Next(TarEntry* entry, std::string* data) {
  if (!broken_.ok()) return broken_;
  if (done_) return false;

  PendingHeaders pending;
  pending.first_header = offset_;
  char block[kTarBlockSize];
  while (true) {
    const uint64_t header_at = offset_;
    Result<bool> is_header = ReadHeaderBlock(block, pending);
    if (!is_header.ok()) return Fail(is_header.status());
    if (!*is_header) {
      done_ = true;
      return false;
    }
    Status status = VerifyChecksum(block, header_at);
    if (!status.ok()) return Fail(status);
    uint64_t size = 0;
    if (!ParseUnsigned(block + kOffSize, 12, &size)) return Fail(MalformedField(header_at, "size"));
    const char type = block[kOffType];
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
      status = ReadExtendedHeader(type, size, header_at, &pending);
      if (!status.ok()) return Fail(status);
      continue;
    }

    TarEntry e;
    e.header_offset = pending.first_header;
    status = DecodeMember(block, size, header_at, &e);
    if (status.ok()) status = ApplyOverrides(pending, header_at, &e);
    if (status.ok()) status = ReadMemberData(header_at, &e, data);
    if (!status.ok()) return Fail(status);
    *entry = std::move(e);
    return true;
  }
}

Result<bool> TarReader::ReadHeaderBlock(char* block, const PendingHeaders& pending) {
  REEL_ASSIGN_OR_RETURN(size_t got, ReadSome(block, kTarBlockSize));
  if (got < kTarBlockSize) {
    std::string where = got == 0 ? (pending.any ? " after an extended header, before its member"
                                                : " without the end-of-archive marker")
                                 : " inside a header block";
    return DataLossError(what_ + ": truncated archive: it ends at offset " +
                         std::to_string(offset_) + where);
  }
  if (!std::all_of(block, block + kTarBlockSize, [](char c) { return c == '\0'; })) return true;
  if (pending.any) {
    return DataLossError(what_ + ": extended header at offset " +
                         std::to_string(pending.first_header) +
                         " is followed by the end-of-archive marker, not a member");
  }
  return false;
}

Status TarReader::VerifyChecksum(const char* block, uint64_t header_at) const {
  // The sum of the header bytes with the checksum field read as spaces. Historic writers summed
  // signed chars; accept either.
  uint64_t stored = 0;
  const bool stored_ok = ParseUnsigned(block + kOffChksum, 8, &stored);
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kTarBlockSize; ++i) {
    const bool in_field = i >= kOffChksum && i < kOffChksum + 8;
    unsigned_sum += in_field ? ' ' : static_cast<unsigned char>(block[i]);
    signed_sum += in_field ? ' ' : static_cast<signed char>(block[i]);
  }
  if (stored_ok && (stored == unsigned_sum || static_cast<int64_t>(stored) == signed_sum)) {
    return Status::Ok();
  }
  return DataLossError(what_ + ": corrupt tar header at offset " + std::to_string(header_at) +
                       ": checksum field says '" + Printable(Field(block, kOffChksum, 8)) +
                       "', the header sums to " + std::to_string(unsigned_sum));
}

Status TarReader::MalformedField(uint64_t header_at, std::string_view field) const {
  return DataLossError(what_ + ": corrupt tar header at offset " + std::to_string(header_at) +
                       ": malformed " + std::string(field) + " field");
}

Status TarReader::ReadExtendedHeader(char type, uint64_t size, uint64_t header_at,
                                     PendingHeaders* pending) {
  if (size > kMaxExtendedHeaderBytes) {
    return DataLossError(what_ + ": extended header at offset " + std::to_string(header_at) +
                         " claims " + std::to_string(size) + " bytes");
  }
  if (size + Padding(size) > source_->remaining()) {
    return DataLossError(what_ + ": truncated archive: extended header at offset " +
                         std::to_string(header_at) + " needs " + std::to_string(size) + " bytes, " +
                         std::to_string(source_->remaining()) + " remain");
  }
  std::string payload(size, '\0');
  REEL_RETURN_IF_ERROR(ReadExact(payload.data(), size, "an extended header"));
  REEL_RETURN_IF_ERROR(Skip(Padding(size), "an extended header"));
  pending->any = true;
  if (type == 'L' || type == 'K') {
    size_t nul = payload.find('\0');
    if (nul != std::string::npos) payload.resize(nul);
    (type == 'L' ? pending->long_name : pending->long_link) = std::move(payload);
    return Status::Ok();
  }
  std::string error;
  if (!ParsePaxRecords(payload, type == 'x' ? &pending->pax : &global_pax_, &error)) {
    return DataLossError(what_ + ": pax header at offset " + std::to_string(header_at) + ": " +
                         error);
  }
  // A global header applies to every later member, so on its own it needs no member after it.
  if (type == 'g') {
    pending->any =
        !pending->pax.empty() || !pending->long_name.empty() || !pending->long_link.empty();
  }
  return Status::Ok();
}

Status TarReader::DecodeMember(const char* block, uint64_t size, uint64_t header_at,
                               TarEntry* e) const {
  const char type = block[kOffType];
  e->type = (type == '\0' || type == '7') ? kTarRegular : type;
  e->size = size;  // until a pax "size" record or the type says otherwise
  uint64_t mode = 0;
  if (!ParseUnsigned(block + kOffMode, 8, &mode)) return MalformedField(header_at, "mode");
  e->mode = static_cast<uint32_t>(mode & 07777);
  if (!ParseUnsigned(block + kOffUid, 8, &e->uid)) return MalformedField(header_at, "uid");
  if (!ParseUnsigned(block + kOffGid, 8, &e->gid)) return MalformedField(header_at, "gid");
  uint64_t unsigned_mtime = 0;
  if (!ParseNumber(block + kOffMtime, 12, true, &e->mtime, &unsigned_mtime)) {
    return MalformedField(header_at, "mtime");
  }
  const bool posix = std::memcmp(block + kOffMagic, "ustar\0", 6) == 0;
  std::string_view prefix = posix ? Field(block, kOffPrefix, kPrefixLen) : std::string_view();
  std::string_view name = Field(block, kOffName, kNameLen);
  e->name = prefix.empty() ? std::string(name) : std::string(prefix) + "/" + std::string(name);
  e->linkname = std::string(Field(block, kOffLinkname, kNameLen));
  return Status::Ok();
}

Status TarReader::ApplyOverrides(const PendingHeaders& pending, uint64_t header_at,
                                 TarEntry* e) const {
  // Weakest first: global pax, GNU long names, this member's pax records.
  std::map<std::string, std::string> pax = global_pax_;
  for (const auto& [key, value] : pending.pax) pax[key] = value;
  if (!pending.long_name.empty()) e->name = pending.long_name;
  if (!pending.long_link.empty()) e->linkname = pending.long_link;
  for (const auto& [key, value] : pax) {
    bool ok = true;
    if (key == "path") {
      e->name = value;
    } else if (key == "linkpath") {
      e->linkname = value;
    } else if (key == "size") {
      ok = ParseDecimal(value, &e->size);
    } else if (key == "uid") {
      ok = ParseDecimal(value, &e->uid);
    } else if (key == "gid") {
      ok = ParseDecimal(value, &e->gid);
    } else if (key == "mtime") {
      ok = ParsePaxTime(value, &e->mtime);
    }
    if (!ok) {
      return DataLossError(what_ + ": pax record " + key + "='" + Printable(value) +
                           "' for the member at offset " + std::to_string(header_at) +
                           " is not a number");
    }
  }
  return Status::Ok();
}

Status TarReader::ReadMemberData(uint64_t header_at, TarEntry* e, std::string* data) {
  // Links, devices, directories and FIFOs have no data whatever their size field says (as
  // Python's tarfile reads them); every other type is followed by `size` bytes.
  const bool has_data = !(e->type >= '1' && e->type <= '6');
  if (!has_data) e->size = 0;
  e->data_offset = offset_;
  const uint64_t stored_bytes = e->size + Padding(e->size);
  if (stored_bytes > source_->remaining()) {
    return DataLossError(what_ + ": truncated archive: member '" + Printable(e->name) +
                         "' at offset " + std::to_string(header_at) + " needs " +
                         std::to_string(stored_bytes) + " bytes of data, " +
                         std::to_string(source_->remaining()) + " remain");
  }
  std::string purpose = "the data of member '" + Printable(e->name) + "'";
  if (data != nullptr) {
    data->resize(e->size);
    REEL_RETURN_IF_ERROR(ReadExact(data->data(), e->size, purpose));
  } else {
    REEL_RETURN_IF_ERROR(Skip(e->size, purpose));
  }
  return Skip(Padding(e->size), purpose);
}

Result<std::vector<TarEntry>> ListTar(std::string_view archive, std::string what) {
  TarReader reader(archive, std::move(what));
  std::vector<TarEntry> entries;
  while (true) {
    TarEntry entry;
    REEL_ASSIGN_OR_RETURN(bool more, reader.Next(&entry, nullptr));
    if (!more) break;
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace reel::dataset
