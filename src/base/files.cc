#include "base/files.h"

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

}  // namespace reel
