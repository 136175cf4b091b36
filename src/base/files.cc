#include "base/files.h"

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

}  // namespace reel
