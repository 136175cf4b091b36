// POSIX tar (ustar, with pax extended headers where ustar cannot say it) writing and reading.
// Reel's shards are tar files so that Python's `tarfile`, `webdataset` and the `tar` command line
// read them unchanged.
//
// Writer output (deterministic for the same calls and options):
//   - one 512-byte ustar header per member (magic "ustar\0", version "00", uid/gid 0, empty
//     uname/gname, mode and mtime from TarWriterOptions), then the data padded with NULs to a
//     multiple of 512 bytes;
//   - names of up to 100 bytes go into the name field; longer ones are split at a '/' into the
//     155-byte prefix field and the name field when possible, and otherwise are carried by a pax
//     extended header (typeflag 'x', name "././@PaxHeader", record "path=..."), which GNU tar,
//     bsdtar and Python's tarfile all understand; sizes of 8 GiB and more get a pax "size" record;
//   - Finish() appends the end-of-archive marker, two zero blocks. No padding to 10 KiB records.
//
// Reader input: ustar, POSIX pax ('x' and 'g' headers: path, linkpath, size, mtime, uid, gid),
// GNU tar ('L'/'K' long names, base-256 numbers, the old "ustar  " magic) and v7 headers. Every
// header's checksum is verified (unsigned or historic signed sum). Errors: DataLoss, naming the
// archive and the byte offset, for a bad checksum, a malformed number or pax record, or an archive
// that ends before its members or before the end-of-archive marker. The reader stops at the
// first zero block; whatever follows it is not read.
//
// Thread-safety: TarWriter and TarReader objects belong to one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/object_store.h"

namespace reel::dataset {

namespace internal {
class TarSource;  // where a TarReader reads from (tar_reader.cc)
}  // namespace internal

inline constexpr uint64_t kTarBlockSize = 512;
inline constexpr uint64_t kTarEndBytes = 2 * kTarBlockSize;  // the end-of-archive marker

// Typeflags as stored in the header. The reader reports '\0' and '7' (old and contiguous regular
// files) as kTarRegular.
inline constexpr char kTarRegular = '0';
inline constexpr char kTarHardLink = '1';
inline constexpr char kTarSymlink = '2';
inline constexpr char kTarDirectory = '5';

struct TarEntry {
  std::string name;  // full path: prefix + '/' + name, or the pax / GNU long name
  char type = kTarRegular;
  uint64_t size = 0;  // data bytes that follow the header (0 for links, directories, devices)
  uint32_t mode = 0;
  int64_t mtime = 0;  // seconds since the Unix epoch
  uint64_t uid = 0;
  uint64_t gid = 0;
  std::string linkname;        // for hard and symbolic links
  uint64_t header_offset = 0;  // first header block of this member (pax / GNU headers included)
  uint64_t data_offset = 0;    // first data byte; the data is [data_offset, data_offset + size)

  bool is_regular() const { return type == kTarRegular; }
};

struct TarWriterOptions {
  int64_t mtime = 0;  // for every member; the default keeps archives byte-identical across runs
  uint32_t mode = 0644;
  // Small pieces (headers, padding, small members) are gathered into writes of about this size.
  size_t buffer_bytes = 1 << 20;
};

// Appends members to a tar archive held in a std::string or streamed into an ObjectWriter. The
// sink is not owned and must outlive the writer; with an ObjectWriter the caller Close()s it
// after Finish() (that publishes the archive atomically, see storage/object_store.h).
// After any failed call the writer is broken: later calls return the same error.
class TarWriter {
 public:
  explicit TarWriter(std::string* out, TarWriterOptions options = {});
  explicit TarWriter(storage::ObjectWriter* out, TarWriterOptions options = {});
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  // Appends a regular file. Returns its entry (offsets inside the archive).
  // Errors: InvalidArgument for an empty name, a name with a NUL byte or ending in '/';
  // FailedPrecondition after Finish(); the sink's errors.
  Result<TarEntry> AddFile(std::string_view name, std::string_view data);

  // Writes the end-of-archive marker and flushes. Errors: the sink's; FailedPrecondition when
  // called twice.
  Status Finish();

  // Bytes of archive produced so far (after Finish(), the archive's size).
  uint64_t offset() const { return offset_; }

  // Bytes AddFile(name, <size bytes>) adds to the archive, headers and padding included.
  static uint64_t MemberBytes(std::string_view name, uint64_t size);

 private:
  Status Emit(std::string_view bytes);
  Status Flush();

  std::string* string_out_ = nullptr;
  storage::ObjectWriter* object_out_ = nullptr;
  TarWriterOptions options_;
  std::string buffer_;
  uint64_t offset_ = 0;
  bool finished_ = false;
  Status broken_;
};

// Reads the members of an archive in order, from memory or streaming from an ObjectReader (read
// once, front to back, in large pieces). `what` names the archive in error messages
// ("file:///data/ds/train/shard-000001.tar"). The source is not owned and must outlive the reader.
// After an error every later call returns the same error.
class TarReader {
 public:
  explicit TarReader(std::string_view archive, std::string what = "tar archive");
  explicit TarReader(storage::ObjectReader* reader, std::string what = "tar archive",
                     size_t buffer_bytes = 4 << 20);
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  // Moves to the next member: fills `entry`, and `data` (when not null) with its data; with a
  // null `data` the data is skipped. Returns false, with `entry` untouched, at the end-of-archive
  // marker. pax and GNU long-name headers are applied, not returned.
  // Errors: DataLoss (see the top of this file); the ObjectReader's errors.
  Result<bool> Next(TarEntry* entry, std::string* data);

  // Bytes consumed so far.
  uint64_t offset() const { return offset_; }

 private:
  // What the extended headers read so far say about the member that follows them (global pax
  // records live in global_pax_, as they outlast the member).
  struct PendingHeaders {
    uint64_t first_header = 0;               // the member's first header block
    std::map<std::string, std::string> pax;  // its 'x' records
    std::string long_name, long_link;        // GNU 'L' and 'K'
    bool any = false;                        // a header that still needs its member
  };

  Status Fail(Status status);
  Result<size_t> ReadSome(char* out, size_t n);  // until n bytes or the end
  Status ReadExact(char* out, size_t n, std::string_view purpose);
  Status Skip(uint64_t n, std::string_view purpose);
  Status MalformedField(uint64_t header_at, std::string_view field) const;  // the DataLoss error

  // The steps of Next, in order. Each returns its error without breaking the reader; Next does.
  // Reads one block: true for a header, false for the end-of-archive marker.
  Result<bool> ReadHeaderBlock(char* block, const PendingHeaders& pending);
  Status VerifyChecksum(const char* block, uint64_t header_at) const;
  // A pax 'x' / 'g' or GNU 'L' / 'K' header's data, `size` bytes, into `pending` (or global_pax_).
  Status ReadExtendedHeader(char type, uint64_t size, uint64_t header_at, PendingHeaders* pending);
  // The member's own header fields, then what the extended headers before it override.
  Status DecodeMember(const char* block, uint64_t size, uint64_t header_at, TarEntry* e) const;
  Status ApplyOverrides(const PendingHeaders& pending, uint64_t header_at, TarEntry* e) const;
  // Sets e->size and e->data_offset; reads the data into `data`, or skips it when null.
  Status ReadMemberData(uint64_t header_at, TarEntry* e, std::string* data);

  std::unique_ptr<internal::TarSource> source_;
  std::string what_;
  uint64_t offset_ = 0;
  bool done_ = false;
  Status broken_;
  std::map<std::string, std::string> global_pax_;
};

// Every member of an in-memory archive (headers only). Errors: as TarReader::Next.
Result<std::vector<TarEntry>> ListTar(std::string_view archive, std::string what = "tar archive");

}  // namespace reel::dataset
