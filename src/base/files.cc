#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "base/allocator.h"

namespace reel {

Result<std::string> ReadFileToString(const std::string& path, std::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return NotFoundError(std::string(what) + " '" + path + "' cannot be read");
  }
  // Read straight into the string, sized from fstat (a stream would copy it twice); a file that
  // grows meanwhile is read on to its end.
  std::string bytes;
  bool failed = false;
  const auto read_into = [&](char* dest, size_t n) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd, dest + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        failed = r < 0;
        break;
      }
      got += static_cast<size_t>(r);
    }
    return got;
  };
  AppendInPlace(&bytes, static_cast<size_t>(st.st_size), read_into);
  while (!failed && bytes.size() >= static_cast<size_t>(st.st_size)) {
    const size_t before = bytes.size();
    AppendInPlace(&bytes, 64 << 10, read_into);
    if (bytes.size() == before) break;
  }
  ::close(fd);
  if (failed) return UnavailableError(std::string(what) + " '" + path + "': the read failed");
  return bytes;
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  return WriteFileAtomically(path, std::vector<std::string_view>{bytes});
}

Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  // A temp name of this writer's own: two processes writing one path at once must not truncate
  // each other's file, which may already be renamed into place.
  static std::atomic<uint64_t> writes{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (std::string_view piece : pieces) {
      out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    }
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return UnavailableError("cannot write " + tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return UnavailableError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return Status::Ok();
}

uint64_t TreeBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

Result<std::vector<std::string>> FindFoldersHolding(const std::string& root,
                                                    const std::string& marker, int depth,
                                                    const std::vector<std::string>& skip) {
  namespace fs = std::filesystem;
  std::error_code ec, ignored;  // a marker that is not there is no match, not an error
  if (!fs::is_directory(root, ignored)) return NotFoundError("folder " + root + " does not exist");
  std::vector<std::string> out;
  if (fs::is_regular_file(fs::path(root) / marker, ignored)) return std::vector<std::string>{root};
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return UnavailableError("cannot list " + root + ": " + ec.message());
  // A folder removed while the search runs ends it with what was found so far.
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ignored)) continue;
    const std::string name = it->path().filename().string();
    const bool skipped =
        name.rfind('.', 0) == 0 || std::find(skip.begin(), skip.end(), name) != skip.end();
    if (skipped || it.depth() + 1 >= depth) it.disable_recursion_pending();
    if (skipped) continue;
    if (fs::is_regular_file(it->path() / marker, ignored)) {
      out.push_back(it->path().string());
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace reel
