// TarWriter: building ustar headers (with pax extended headers where ustar cannot say it) and
// appending members to a string or an ObjectWriter.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "base/status.h"
#include "dataset/tar.h"
#include "dataset/tar_format.h"
#include "storage/object_store.h"

namespace reel::dataset {

// The ustar layout shared with the other half (tar_format.h), by its short names.
using internal::kNameLen, internal::kOffChksum, internal::kOffDevMajor, internal::kOffDevMinor,
    internal::kOffGid, internal::kOffMagic, internal::kOffMode, internal::kOffMtime,
    internal::kOffName, internal::kOffPrefix, internal::kOffSize, internal::kOffType,
    internal::kOffUid, internal::kOffVersion, internal::kPrefixLen, internal::Padding,
    internal::Printable;

namespace {

constexpr uint64_t kMaxOctal11 = 077777777777ull;  // largest value of an 11-digit octal field
constexpr std::string_view kPaxHeaderName = "././@PaxHeader";

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

}  // namespace

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

}  // namespace reel::dataset
