#include "base/strings.h"

#include <cstdio>

namespace reel {

std::string PrintableForMessage(std::string_view s, size_t max_bytes) {
  std::string out;
  for (char c : s.substr(0, max_bytes)) {
    auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", b);
      out += buf;
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

}  // namespace reel
