#include "base/strings.h"

#include <charconv>
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

std::optional<int64_t> ParseInt64(std::string_view s) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

std::string FormatDouble(double value) {
  char buf[32];
  const auto [end, error] = std::to_chars(buf, buf + sizeof buf, value);
  return error == std::errc() ? std::string(buf, end) : std::to_string(value);
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::vector<std::string> SplitString(std::string_view s, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = s.find(separator); at != std::string_view::npos; at = s.find(separator, start)) {
    parts.emplace_back(s.substr(start, at - start));
    start = at + 1;
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

std::string JoinStrings(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

}  // namespace reel
