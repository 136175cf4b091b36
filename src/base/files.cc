#include "base/files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace reel {

Result<std::string> ReadFileToString(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(std::string(what) + " '" + path + "' cannot be read");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return UnavailableError(std::string(what) + " '" + path + "': the read failed");
  return bytes.str();
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return UnavailableError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return UnavailableError("cannot rename " + tmp + " to " + path + ": " + ec.message());
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
