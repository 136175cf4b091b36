#include "storage/local_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "storage/listing.h"

namespace reel::storage {
namespace {

constexpr std::string_view kStoreTempPrefix = ".reel-tmp-";

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// mkdir -p. A component that exists as a file gives FailedPrecondition.
Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return FailedPreconditionError("'" + dir + "' is a file, so nothing can be stored under it");
  }
  if (dir != "/" && !dir.empty()) REEL_RETURN_IF_ERROR(MakeDirs(ParentOf(dir)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, "mkdir '" + dir + "'");
  }
  return Status::Ok();
}

// Opens `path` read-only (with `flags` added), fsyncs it and closes it: fsync acts on the file or
// folder, whichever descriptor asks. `what`: "directory " or "" for messages.
Status FsyncByName(const std::string& path, int flags, const std::string& what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return ErrnoToStatus(errno, "open " + what + "'" + path + "'");
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoToStatus(err, "fsync " + what + "'" + path + "'");
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) { return FsyncByName(dir, O_DIRECTORY, "directory "); }

// What replacing or linking over a folder of objects returns.
Status DirectoryInTheWay(const std::string& path) {
  return FailedPreconditionError("'" + path + "' is a directory of other objects");
}

// Writes in bounded pieces and, for files that will be fsync'ed, starts writeback of each piece
// right away (as RocksDB's bytes_per_sync does): dirtying hundreds of MiB at once makes the
// kernel throttle the writer, measured here at a quarter of the disk's speed, and leaves all
// the work to the final fsync.
Status WriteAll(int fd, std::string_view data, const std::string& path, bool write_behind,
                uint64_t* written) {
  constexpr size_t kPiece = 8 << 20;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), std::min(data.size(), kPiece));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "write '" + path + "'");
    }
    if (write_behind) {
      ::sync_file_range(fd, static_cast<off_t>(*written), n, SYNC_FILE_RANGE_WRITE);
    }
    *written += static_cast<uint64_t>(n);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

ObjectInfo InfoFromStat(std::string key, const struct stat& st) {
  ObjectInfo info;
  info.key = std::move(key);
  info.size = static_cast<uint64_t>(st.st_size);
  int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  info.mtime_ms = mtime_ns / 1000000;
  char etag[64];
  std::snprintf(etag, sizeof etag, "%llx-%llx-%llx", static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_size),
                static_cast<unsigned long long>(mtime_ns));
  info.etag = etag;
  return info;
}

Status ShrankWhileRead(const std::string& path, uint64_t got, uint64_t length) {
  return DataLossError("'" + path + "' shrank while being read (" + std::to_string(got) + " of " +
                       std::to_string(length) + " bytes)");
}

Status MissingKey(std::string_view key, const std::string& path) {
  return NotFoundError("no such key '" + std::string(key) + "' (" + path + ")");
}

// A file being written next to its final name; removed unless Publish succeeds.
class TempFile {
 public:
  static Result<std::unique_ptr<TempFile>> Create(const std::string& final_path, bool durable) {
    REEL_RETURN_IF_ERROR(MakeDirs(ParentOf(final_path)));
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 rng(std::random_device{}());
    std::string dir = ParentOf(final_path);
    for (int attempt = 0; attempt < 8; ++attempt) {
      char name[96];
      std::snprintf(name, sizeof name, "%.*s%d-%llu-%llx",
                    static_cast<int>(kStoreTempPrefix.size()), kStoreTempPrefix.data(),
                    static_cast<int>(::getpid()), static_cast<unsigned long long>(counter++),
                    static_cast<unsigned long long>(rng()));
      std::string path = dir + "/" + name;
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) return std::unique_ptr<TempFile>(new TempFile(fd, path, final_path, durable));
      if (errno == ENOENT) {  // a Delete removed the folder, empty for a moment, in between
        REEL_RETURN_IF_ERROR(MakeDirs(dir));
        continue;
      }
      if (errno != EEXIST) return ErrnoToStatus(errno, "create temporary file in '" + dir + "'");
    }
    return InternalError("could not pick a unique temporary file name in '" + dir + "'");
  }

  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!published_) ::unlink(path_.c_str());
  }

  Status Write(std::string_view data) { return WriteAll(fd_, data, path_, durable_, &written_); }

  // Makes the bytes durable, then gives them the final name.
  Status Publish(bool if_absent) {
    if (durable_ && ::fsync(fd_) != 0) return ErrnoToStatus(errno, "fsync '" + path_ + "'");
    REEL_RETURN_IF_ERROR(Seal());
    REEL_RETURN_IF_ERROR(if_absent ? Link() : Rename());
    if (durable_) return FsyncDir(ParentOf(final_path_));
    return Status::Ok();
  }

  // Closes the file, written in full, without flushing it: a batch flushes it later by name, so
  // that a batch of thousands holds no descriptors open.
  Status Seal() {
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return ErrnoToStatus(errno, "close '" + path_ + "'");
    return Status::Ok();
  }

  // Makes a sealed file's bytes durable.
  Status SyncSealed() const { return FsyncByName(path_, 0, ""); }

  // Gives a sealed file its final name, replacing what had it.
  Status Rename() {
    if (::rename(path_.c_str(), final_path_.c_str()) != 0) {
      const int err = errno;
      if (err == EISDIR) return DirectoryInTheWay(final_path_);
      return ErrnoToStatus(err, "rename to '" + final_path_ + "'");
    }
    published_ = true;
    return Status::Ok();
  }

  const std::string& final_path() const { return final_path_; }

 private:
  // Gives a sealed file its final name unless something has it: link() refuses an existing name
  // atomically; the temp name is removed either way.
  Status Link() const {
    if (::link(path_.c_str(), final_path_.c_str()) == 0) return Status::Ok();
    const int err = errno;
    if (err == EEXIST) {
      struct stat st;
      if (::lstat(final_path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return DirectoryInTheWay(final_path_);
      }
      return AlreadyExistsError("'" + final_path_ + "' already exists");
    }
    return ErrnoToStatus(err, "link '" + final_path_ + "'");
  }

  TempFile(int fd, std::string path, std::string final_path, bool durable)
      : fd_(fd), path_(std::move(path)), final_path_(std::move(final_path)), durable_(durable) {}

  int fd_;
  std::string path_;
  std::string final_path_;
  bool durable_;
  uint64_t written_ = 0;
  bool published_ = false;
};

class LocalReader : public ObjectReader {
 public:
  LocalReader(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  ~LocalReader() override { ::close(fd_); }
  Result<size_t> Read(char* buffer, size_t n) override {
    while (true) {
      ssize_t got = ::read(fd_, buffer, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return ErrnoToStatus(errno, "read '" + path_ + "'");
    }
  }
  uint64_t size() const override { return size_; }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

class LocalWriter : public ObjectWriter {
 public:
  explicit LocalWriter(std::unique_ptr<TempFile> file) : file_(std::move(file)) {}
  Status Write(std::string_view data) override {
    if (!file_) return FailedPreconditionError("write to a closed writer");
    return file_->Write(data);
  }
  Status Close() override {
    if (!file_) return FailedPreconditionError("writer closed twice");
    Status status = file_->Publish(/*if_absent=*/false);
    file_.reset();
    return status;
  }

 private:
  std::unique_ptr<TempFile> file_;
};

// Writes each object to its temp file at Put, flushing nothing. Commit fsyncs them all (the first
// fsync commits the file system's journal for every one, so the others find theirs done), renames
// them, and fsyncs each folder once: two journal commits for the batch where Put pays two per
// object. Objects are visible only once durable, as with Put.
class LocalBatch : public PutBatch {
 public:
  explicit LocalBatch(const LocalStore& store) : store_(store) {}

  Status Put(std::string_view key, std::string_view data) override {
    return PutJoined(key, {data});
  }

  Status PutJoined(std::string_view key, const std::vector<std::string_view>& pieces) override {
    REEL_RETURN_IF_ERROR(ValidateKey(key));
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<TempFile> file,
                          TempFile::Create(store_.PathOf(key), /*durable=*/true));
    for (std::string_view piece : pieces) REEL_RETURN_IF_ERROR(file->Write(piece));
    REEL_RETURN_IF_ERROR(file->Seal());
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(file));
    return Status::Ok();
  }

  Status Commit() override {
    std::vector<std::unique_ptr<TempFile>> files;
    {
      std::lock_guard<std::mutex> lock(mu_);
      files.swap(pending_);
    }
    for (const auto& f : files) REEL_RETURN_IF_ERROR(f->SyncSealed());
    std::set<std::string> folders;
    for (const auto& f : files) {
      REEL_RETURN_IF_ERROR(f->Rename());
      folders.insert(ParentOf(f->final_path()));
    }
    for (const std::string& folder : folders) REEL_RETURN_IF_ERROR(FsyncDir(folder));
    return Status::Ok();
  }

 private:
  const LocalStore& store_;
  std::mutex mu_;
  std::vector<std::unique_ptr<TempFile>> pending_;  // written, sealed, not yet renamed
};

// Opens a key's file for reading; NotFound when it is missing or a directory.
Result<int> OpenForRead(std::string_view key, const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return MissingKey(key, path);
    return ErrnoToStatus(errno, "open '" + path + "'");
  }
  if (::fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    ::close(fd);
    return MissingKey(key, path);
  }
  return fd;
}

// Reads [offset, offset + length) into out; Ok with fewer bytes only at the end of the file.
Status PreadAll(int fd, char* out, uint64_t offset, uint64_t length, const std::string& path,
                uint64_t* done) {
  *done = 0;
  while (*done < length) {
    ssize_t n = ::pread(fd, out + *done, length - *done, static_cast<off_t>(offset + *done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read '" + path + "'");
    }
    if (n == 0) break;
    *done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// How many threads read one range: a single thread copies from the page cache at about
// 3 GB/s here (a quarter of memory bandwidth), so a large object is read in pieces side by side
// (as the S3 store reads parallel ranges); small ones are not worth a thread.
unsigned ReadThreads(uint64_t length) {
  constexpr uint64_t kBytesPerThread = 16 << 20;
  constexpr unsigned kMaxThreads = 4;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(
      std::clamp<uint64_t>(length / kBytesPerThread, 1, std::min(cores, kMaxThreads)));
}

Result<std::string> ReadRange(int fd, uint64_t offset, uint64_t length, const std::string& path) {
  const unsigned threads = ReadThreads(length);
  std::vector<Status> status(threads);
  std::string out;
  AppendInPlace(&out, length, [&](char* dest, size_t) {
    const uint64_t piece = length / threads;
    auto read_piece = [&](unsigned i) {
      const uint64_t begin = i * piece, size = i + 1 == threads ? length - begin : piece;
      uint64_t done = 0;
      status[i] = PreadAll(fd, dest + begin, offset + begin, size, path, &done);
      if (status[i].ok() && done != size) status[i] = ShrankWhileRead(path, begin + done, length);
    };
    std::vector<std::thread> helpers;
    for (unsigned i = 1; i < threads; ++i) helpers.emplace_back(read_piece, i);
    read_piece(0);
    for (auto& helper : helpers) helper.join();
    return length;  // on a failure the bytes are not used
  });
  for (const Status& s : status) REEL_RETURN_IF_ERROR(s);
  return out;
}

// Appends every regular file under dir (recursively) whose key starts with prefix.
// A folder that is gone (or never was) holds no keys; one that cannot be read is an error, never
// an empty listing.
Status Walk(const std::string& root, const std::string& dir_key, const std::string& prefix,
            std::vector<ObjectInfo>* out) {
  // root is "" for a store rooted at "/".
  std::string dir_path = dir_key.empty() ? (root.empty() ? "/" : root) : root + "/" + dir_key;
  DIR* dir = ::opendir(dir_path.c_str());
  if (!dir) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Ok();
    return ErrnoToStatus(errno, "list '" + dir_path + "'");
  }
  while (struct dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name == "." || name == ".." || name.rfind(kStoreTempPrefix, 0) == 0) continue;
    std::string key = dir_key.empty() ? std::string(name) : dir_key + "/" + std::string(name);
    // Prune subtrees that cannot hold keys with this prefix.
    size_t common = std::min(key.size(), prefix.size());
    if (key.compare(0, common, prefix, 0, common) != 0) continue;
    struct stat st;
    if (::fstatat(::dirfd(dir), entry->d_name, &st, 0) != 0) continue;  // raced with a delete
    if (S_ISDIR(st.st_mode)) {
      Status walked = Walk(root, key, prefix, out);
      if (!walked.ok()) {
        ::closedir(dir);
        return walked;
      }
    } else if (S_ISREG(st.st_mode) && key.size() >= prefix.size()) {
      out->push_back(InfoFromStat(std::move(key), st));
    }
  }
  ::closedir(dir);
  return Status::Ok();
}

}  // namespace

LocalStore::LocalStore(std::string root, LocalStoreOptions options)
    : root_(std::move(root)), options_(options) {}

Result<std::unique_ptr<LocalStore>> LocalStore::Open(const std::string& root,
                                                     LocalStoreOptions options) {
  if (root.empty() || root.front() != '/') {
    return InvalidArgumentError("local store root must be an absolute path, got '" + root + "'");
  }
  std::string clean = root;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  struct stat st;
  if (::stat(clean.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoToStatus(errno, "local store root '" + clean + "'");
    if (!options.create_root)
      return NotFoundError("local store root '" + clean + "' does not exist");
    REEL_RETURN_IF_ERROR(MakeDirs(clean));
  } else if (!S_ISDIR(st.st_mode)) {
    return FailedPreconditionError("local store root '" + clean + "' is not a directory");
  }
  if (clean == "/") clean.clear();  // keys then map to "/key"
  return std::unique_ptr<LocalStore>(new LocalStore(std::move(clean), options));
}

std::string LocalStore::uri() const { return "file://" + (root_.empty() ? "/" : root_); }

Status LocalStore::WriteAtomically(std::string_view key, std::string_view data, Publish mode) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<TempFile> file, TempFile::Create(path, options_.fsync));
  REEL_RETURN_IF_ERROR(file->Write(data));
  return file->Publish(mode == Publish::kIfAbsent);
}

Status LocalStore::Put(std::string_view key, std::string_view data) {
  return WriteAtomically(key, data, Publish::kReplace);
}

Status LocalStore::PutIfAbsent(std::string_view key, std::string_view data) {
  return WriteAtomically(key, data, Publish::kIfAbsent);
}

Result<std::string> LocalStore::Get(std::string_view key, ObjectInfo* info) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  struct stat st;
  REEL_ASSIGN_OR_RETURN(int fd, OpenForRead(key, path, &st));
  auto data = ReadRange(fd, 0, static_cast<uint64_t>(st.st_size), path);
  ::close(fd);
  if (data.ok() && info) *info = InfoFromStat(std::string(key), st);
  return data;
}

Result<std::string> LocalStore::GetRange(std::string_view key, uint64_t offset, uint64_t length) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  struct stat st;
  REEL_ASSIGN_OR_RETURN(int fd, OpenForRead(key, path, &st));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    ::close(fd);
    return OutOfRangeError("range starts at " + std::to_string(offset) + " past the end of '" +
                           std::string(key) + "' (" + std::to_string(size) + " bytes)");
  }
  auto data = ReadRange(fd, offset, std::min(length, size - offset), path);
  ::close(fd);
  return data;
}

Result<ObjectInfo> LocalStore::Head(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return MissingKey(key, path);
    return ErrnoToStatus(errno, "stat '" + path + "'");
  }
  if (!S_ISREG(st.st_mode)) return MissingKey(key, path);
  return InfoFromStat(std::string(key), st);
}

Result<ListPage> LocalStore::List(const ListOptions& options) {
  REEL_RETURN_IF_ERROR(ValidateListOptions(options));
  // Walk from the deepest directory the prefix names, so listing "a/b/" never reads "c/".
  std::string start_dir;
  size_t slash = options.prefix.rfind('/');
  if (slash != std::string::npos) start_dir = options.prefix.substr(0, slash);
  std::vector<ObjectInfo> found;
  REEL_RETURN_IF_ERROR(Walk(root_, start_dir, options.prefix, &found));
  std::sort(found.begin(), found.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return PageFromSortedObjects(found, options);
}

// Folders exist only to hold objects (as prefixes on S3): the ones a delete leaves empty go
// too, up to the root. rmdir refuses a folder that is not empty, so a concurrent Put's folder
// stays (and a Put that lost its folder in between makes it again).
void LocalStore::RemoveEmptyParents(const std::string& path) const {
  for (std::string dir = ParentOf(path);
       dir.size() > root_.size() && dir.compare(0, root_.size(), root_) == 0; dir = ParentOf(dir)) {
    if (::rmdir(dir.c_str()) != 0) return;
  }
}

Status LocalStore::Delete(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  if (::unlink(path.c_str()) == 0) {
    RemoveEmptyParents(path);
    return Status::Ok();
  }
  int err = errno;
  // A missing key, or a name that is a directory of other objects, holds no object to delete.
  if (err == ENOENT || err == ENOTDIR || err == EISDIR) return Status::Ok();
  return ErrnoToStatus(err, "delete '" + path + "'");
}

std::optional<std::string> LocalStore::LocalPath(std::string_view key) const {
  if (!ValidateKey(key).ok()) return std::nullopt;
  return PathOf(key);
}

Result<std::unique_ptr<ObjectReader>> LocalStore::OpenReader(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  std::string path = PathOf(key);
  struct stat st;
  REEL_ASSIGN_OR_RETURN(int fd, OpenForRead(key, path, &st));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<ObjectReader>(
      std::make_unique<LocalReader>(fd, static_cast<uint64_t>(st.st_size), path));
}

std::unique_ptr<PutBatch> LocalStore::NewBatch() {
  if (!options_.fsync) return ObjectStore::NewBatch();  // nothing to share: Put flushes nothing
  return std::make_unique<LocalBatch>(*this);
}

Result<std::unique_ptr<ObjectWriter>> LocalStore::OpenWriter(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<TempFile> file,
                        TempFile::Create(PathOf(key), options_.fsync));
  return std::unique_ptr<ObjectWriter>(std::make_unique<LocalWriter>(std::move(file)));
}

}  // namespace reel::storage
