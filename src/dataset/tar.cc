#include "dataset/tar.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/strings.h"

namespace reel::dataset {
namespace {

constexpr uint64_t kMaxOctal11 = 077777777777ull;  // largest value of an 11-digit octal field
constexpr size_t kNameLen = 100;
constexpr size_t kPrefixLen = 155;
constexpr uint64_t kMaxExtendedHeaderBytes = 16 << 20;  // pax / GNU long-name data
constexpr std::string_view kPaxHeaderName = "././@PaxHeader";

// Header field offsets (POSIX.1-1988 ustar).
constexpr size_t kOffName = 0, kOffMode = 100, kOffUid = 108, kOffGid = 116, kOffSize = 124,
                 kOffMtime = 136, kOffChksum = 148, kOffType = 156, kOffLinkname = 157,
                 kOffMagic = 257, kOffVersion = 263, kOffDevMajor = 329, kOffDevMinor = 337,
                 kOffPrefix = 345;

uint64_t Padding(uint64_t size) { return (kTarBlockSize - size % kTarBlockSize) % kTarBlockSize; }

const char kZeros[kTarBlockSize] = {};

// `width - 1` zero-padded octal digits and a NUL.
void PutOctal(char* field, size_t width, uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%0*" PRIo64, static_cast<int>(width - 1), value);
  std::memcpy(field, buf, width - 1);
  field[width - 1] = '\0';
}

// Splits a name into ustar prefix and name fields; false when it cannot be done.
bool SplitUstarName(std::string_view name, std::string_view* prefix, std::string_view* base) {
  if (name.size() <= kNameLen) {
    *prefix = {};
    *base = name;
    return true;
  }
  for (size_t p = 1; p < name.size() && p <= kPrefixLen; ++p) {
    if (name[p] != '/') continue;
    size_t base_len = name.size() - p - 1;
    if (base_len == 0 || base_len > kNameLen) continue;
    *prefix = name.substr(0, p);
    *base = name.substr(p + 1);
    return true;
  }
  return false;
}

size_t DecimalDigits(size_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

// "<len> key=value\n" where <len> counts the whole record, itself included.
std::string PaxRecord(std::string_view key, std::string_view value) {
  size_t body = 1 + key.size() + 1 + value.size() + 1;
  size_t len = body + DecimalDigits(body);
  if (DecimalDigits(len) != DecimalDigits(body)) len = body + DecimalDigits(len);
  std::string out = std::to_string(len);
  out += ' ';
  out += key;
  out += '=';
  out += value;
  out += '\n';
  return out;
}

// The pax records a member needs ("" when ustar suffices).
std::string PaxRecordsFor(std::string_view name, uint64_t size) {
  std::string pax;
  std::string_view prefix, base;
  if (!SplitUstarName(name, &prefix, &base)) pax += PaxRecord("path", name);
  if (size > kMaxOctal11) pax += PaxRecord("size", std::to_string(size));
  return pax;
}

std::string BuildHeader(std::string_view prefix, std::string_view name, uint64_t size, char type,
                        uint32_t mode, int64_t mtime) {
  std::string block(kTarBlockSize, '\0');
  char* h = block.data();
  name.substr(0, kNameLen).copy(h + kOffName, kNameLen);
  PutOctal(h + kOffMode, 8, mode & 07777);
  PutOctal(h + kOffUid, 8, 0);
  PutOctal(h + kOffGid, 8, 0);
  PutOctal(h + kOffSize, 12, size > kMaxOctal11 ? 0 : size);
  PutOctal(h + kOffMtime, 12, static_cast<uint64_t>(mtime));
  h[kOffType] = type;
  std::memcpy(h + kOffMagic, "ustar\0", 6);
  std::memcpy(h + kOffVersion, "00", 2);
  PutOctal(h + kOffDevMajor, 8, 0);
  PutOctal(h + kOffDevMinor, 8, 0);
  prefix.substr(0, kPrefixLen).copy(h + kOffPrefix, kPrefixLen);
  // The checksum is computed with the checksum field as eight spaces.
  std::memset(h + kOffChksum, ' ', 8);
  uint32_t sum = 0;
  for (char c : block) sum += static_cast<unsigned char>(c);
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%06o", sum);
  std::memcpy(h + kOffChksum, buf, 6);
  h[kOffChksum + 6] = '\0';
  h[kOffChksum + 7] = ' ';
  return block;
}

std::string Printable(std::string_view s) { return PrintableForMessage(s, 300); }

// A NUL-terminated (or full-width) string field.
std::string_view Field(const char* block, size_t offset, size_t width) {
  const char* start = block + offset;
  const void* nul = std::memchr(start, '\0', width);
  return std::string_view(start, nul ? static_cast<const char*>(nul) - start : width);
}

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

// ------------------------------------------------------------------------------------------------
// TarWriter

TarWriter::TarWriter(std::string* out, TarWriterOptions options)
    : string_out_(out), options_(options) {
  options_.mtime = std::clamp<int64_t>(options_.mtime, 0, static_cast<int64_t>(kMaxOctal11));
}

TarWriter::TarWriter(storage::ObjectWriter* out, TarWriterOptions options)
    : object_out_(out), options_(options) {
  options_.mtime = std::clamp<int64_t>(options_.mtime, 0, static_cast<int64_t>(kMaxOctal11));
  buffer_.reserve(options_.buffer_bytes);
}

TarWriter::~TarWriter() = default;

uint64_t TarWriter::MemberBytes(std::string_view name, uint64_t size) {
  uint64_t bytes = kTarBlockSize + size + Padding(size);
  std::string pax = PaxRecordsFor(name, size);
  if (!pax.empty()) bytes += kTarBlockSize + pax.size() + Padding(pax.size());
  return bytes;
}

Status TarWriter::Emit(std::string_view bytes) {
  if (string_out_ != nullptr) {
    string_out_->append(bytes);
  } else if (bytes.size() >= options_.buffer_bytes) {
    REEL_RETURN_IF_ERROR(Flush());
    REEL_RETURN_IF_ERROR(object_out_->Write(bytes));
  } else {
    buffer_.append(bytes);
    if (buffer_.size() >= options_.buffer_bytes) REEL_RETURN_IF_ERROR(Flush());
  }
  offset_ += bytes.size();
  return Status::Ok();
}

Status TarWriter::Flush() {
  if (object_out_ == nullptr || buffer_.empty()) return Status::Ok();
  Status status = object_out_->Write(buffer_);
  buffer_.clear();
  return status;
}

Result<TarEntry> TarWriter::AddFile(std::string_view name, std::string_view data) {
  if (!broken_.ok()) return broken_;
  if (finished_) return FailedPreconditionError("tar writer: AddFile after Finish");
  if (name.empty()) return InvalidArgumentError("tar member name is empty");
  if (name.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("tar member name '" + Printable(name) + "' contains a NUL byte");
  }
  if (name.back() == '/') {
    return InvalidArgumentError("tar member name '" + Printable(name) +
                                "' ends in '/' (a directory name)");
  }
  TarEntry entry;
  entry.name = std::string(name);
  entry.type = kTarRegular;
  entry.size = data.size();
  entry.mode = options_.mode & 07777;
  entry.mtime = options_.mtime;
  entry.header_offset = offset_;

  std::string_view prefix, base;
  const bool fits = SplitUstarName(name, &prefix, &base);
  std::string pax = PaxRecordsFor(name, data.size());
  Status status;
  if (!pax.empty()) {
    std::string header = BuildHeader({}, kPaxHeaderName, pax.size(), 'x', 0644, options_.mtime);
    pax.append(Padding(pax.size()), '\0');
    status = Emit(header);
    if (status.ok()) status = Emit(pax);
  }
  if (status.ok()) {
    // With a pax path the ustar fields carry a truncated name for readers without pax support.
    std::string header =
        fits ? BuildHeader(prefix, base, data.size(), kTarRegular, entry.mode, options_.mtime)
             : BuildHeader({}, name.substr(0, kNameLen), data.size(), kTarRegular, entry.mode,
                           options_.mtime);
    status = Emit(header);
  }
  entry.data_offset = offset_;
  if (status.ok()) status = Emit(data);
  if (status.ok()) status = Emit(std::string_view(kZeros, Padding(data.size())));
  if (!status.ok()) {
    broken_ = status;
    return status;
  }
  return entry;
}

Status TarWriter::Finish() {
  if (!broken_.ok()) return broken_;
  if (finished_) return FailedPreconditionError("tar writer: Finish called twice");
  finished_ = true;
  Status status = Emit(std::string_view(kZeros, kTarBlockSize));
  if (status.ok()) status = Emit(std::string_view(kZeros, kTarBlockSize));
  if (status.ok()) status = Flush();
  if (!status.ok()) broken_ = status;
  return status;
}

// ------------------------------------------------------------------------------------------------
// TarReader

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

Result<bool> TarReader::Next(TarEntry* entry, std::string* data) {
  if (!broken_.ok()) return broken_;
  if (done_) return false;

  std::map<std::string, std::string> local_pax;
  std::string gnu_long_name, gnu_long_link;
  bool have_extended = false;
  const uint64_t first_header = offset_;
  char block[kTarBlockSize];
  while (true) {
    const uint64_t header_at = offset_;
    Result<size_t> got = ReadSome(block, kTarBlockSize);
    if (!got.ok()) return Fail(got.status());
    if (*got < kTarBlockSize) {
      std::string where = *got == 0
                              ? (have_extended ? " after an extended header, before its member"
                                               : " without the end-of-archive marker")
                              : " inside a header block";
      return Fail(DataLossError(what_ + ": truncated archive: it ends at offset " +
                                std::to_string(offset_) + where));
    }

    if (std::all_of(block, block + kTarBlockSize, [](char c) { return c == '\0'; })) {
      if (have_extended) {
        return Fail(DataLossError(what_ + ": extended header at offset " +
                                  std::to_string(first_header) +
                                  " is followed by the end-of-archive marker, not a member"));
      }
      done_ = true;
      return false;
    }

    // Checksum: the sum of the header bytes with the checksum field read as spaces. Historic
    // writers summed signed chars; accept either.
    int64_t ignored = 0;
    uint64_t stored = 0;
    const bool stored_ok = ParseNumber(block + kOffChksum, 8, false, &ignored, &stored);
    uint64_t unsigned_sum = 0;
    int64_t signed_sum = 0;
    for (size_t i = 0; i < kTarBlockSize; ++i) {
      const bool in_field = i >= kOffChksum && i < kOffChksum + 8;
      unsigned_sum += in_field ? ' ' : static_cast<unsigned char>(block[i]);
      signed_sum += in_field ? ' ' : static_cast<signed char>(block[i]);
    }
    if (!stored_ok || (stored != unsigned_sum && static_cast<int64_t>(stored) != signed_sum)) {
      return Fail(DataLossError(what_ + ": corrupt tar header at offset " +
                                std::to_string(header_at) + ": checksum field says '" +
                                Printable(Field(block, kOffChksum, 8)) + "', the header sums to " +
                                std::to_string(unsigned_sum)));
    }

    auto bad_field = [&](std::string_view field) {
      return Fail(DataLossError(what_ + ": corrupt tar header at offset " +
                                std::to_string(header_at) + ": malformed " + std::string(field) +
                                " field"));
    };
    int64_t signed_value = 0;
    uint64_t size = 0;
    if (!ParseNumber(block + kOffSize, 12, false, &signed_value, &size)) return bad_field("size");
    char type = block[kOffType];

    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
      if (size > kMaxExtendedHeaderBytes) {
        return Fail(DataLossError(what_ + ": extended header at offset " +
                                  std::to_string(header_at) + " claims " + std::to_string(size) +
                                  " bytes"));
      }
      if (size + Padding(size) > source_->remaining()) {
        return Fail(DataLossError(what_ + ": truncated archive: extended header at offset " +
                                  std::to_string(header_at) + " needs " + std::to_string(size) +
                                  " bytes, " + std::to_string(source_->remaining()) + " remain"));
      }
      std::string payload(size, '\0');
      Status read = ReadExact(payload.data(), size, "an extended header");
      if (read.ok()) read = Skip(Padding(size), "an extended header");
      if (!read.ok()) return Fail(read);
      have_extended = true;
      if (type == 'L' || type == 'K') {
        size_t nul = payload.find('\0');
        if (nul != std::string::npos) payload.resize(nul);
        (type == 'L' ? gnu_long_name : gnu_long_link) = std::move(payload);
      } else {
        std::string error;
        if (!ParsePaxRecords(payload, type == 'x' ? &local_pax : &global_pax_, &error)) {
          return Fail(DataLossError(what_ + ": pax header at offset " + std::to_string(header_at) +
                                    ": " + error));
        }
        if (type == 'g')
          have_extended = !local_pax.empty() || !gnu_long_name.empty() || !gnu_long_link.empty();
      }
      continue;
    }

    TarEntry e;
    e.header_offset = first_header;
    e.type = (type == '\0' || type == '7') ? kTarRegular : type;
    uint64_t mode = 0;
    if (!ParseNumber(block + kOffMode, 8, false, &signed_value, &mode)) return bad_field("mode");
    e.mode = static_cast<uint32_t>(mode & 07777);
    if (!ParseNumber(block + kOffUid, 8, false, &signed_value, &e.uid)) return bad_field("uid");
    if (!ParseNumber(block + kOffGid, 8, false, &signed_value, &e.gid)) return bad_field("gid");
    uint64_t unsigned_mtime = 0;
    if (!ParseNumber(block + kOffMtime, 12, true, &e.mtime, &unsigned_mtime)) {
      return bad_field("mtime");
    }
    const bool posix = std::memcmp(block + kOffMagic, "ustar\0", 6) == 0;
    std::string_view prefix = posix ? Field(block, kOffPrefix, kPrefixLen) : std::string_view();
    std::string_view name = Field(block, kOffName, kNameLen);
    e.name = prefix.empty() ? std::string(name) : std::string(prefix) + "/" + std::string(name);
    e.linkname = std::string(Field(block, kOffLinkname, kNameLen));

    // Overrides, weakest first: global pax, GNU long names, this member's pax records.
    std::map<std::string, std::string> pax = global_pax_;
    for (auto& [key, value] : local_pax) pax[key] = value;
    if (!gnu_long_name.empty()) e.name = gnu_long_name;
    if (!gnu_long_link.empty()) e.linkname = gnu_long_link;
    for (const auto& [key, value] : pax) {
      bool ok = true;
      if (key == "path") {
        e.name = value;
      } else if (key == "linkpath") {
        e.linkname = value;
      } else if (key == "size") {
        ok = ParseDecimal(value, &size);
      } else if (key == "uid") {
        ok = ParseDecimal(value, &e.uid);
      } else if (key == "gid") {
        ok = ParseDecimal(value, &e.gid);
      } else if (key == "mtime") {
        ok = ParsePaxTime(value, &e.mtime);
      }
      if (!ok) {
        return Fail(DataLossError(what_ + ": pax record " + key + "='" + Printable(value) +
                                  "' for the member at offset " + std::to_string(header_at) +
                                  " is not a number"));
      }
    }

    // Links, devices, directories and FIFOs have no data whatever their size field says (as
    // Python's tarfile reads them); every other type is followed by `size` bytes.
    const bool has_data = !(e.type >= '1' && e.type <= '6');
    e.size = has_data ? size : 0;
    e.data_offset = offset_;
    const uint64_t stored_bytes = e.size + Padding(e.size);
    if (stored_bytes > source_->remaining()) {
      return Fail(DataLossError(what_ + ": truncated archive: member '" + Printable(e.name) +
                                "' at offset " + std::to_string(header_at) + " needs " +
                                std::to_string(stored_bytes) + " bytes of data, " +
                                std::to_string(source_->remaining()) + " remain"));
    }
    std::string purpose = "the data of member '" + Printable(e.name) + "'";
    Status read;
    if (data != nullptr) {
      data->resize(e.size);
      read = ReadExact(data->data(), e.size, purpose);
    } else {
      read = Skip(e.size, purpose);
    }
    if (read.ok()) read = Skip(Padding(e.size), purpose);
    if (!read.ok()) return Fail(read);
    *entry = std::move(e);
    return true;
  }
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
