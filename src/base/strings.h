// Small string helpers: for messages, and numbers read and written exactly.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reel {

// `s` made safe to quote in an error message: printable ASCII kept, other bytes as \xNN, cut
// after `max_bytes` bytes with "..." appended.
std::string PrintableForMessage(std::string_view s, size_t max_bytes = 200);

// A whole decimal integer ("-12"); nullopt for anything else, spaces and overflow included.
std::optional<int64_t> ParseInt64(std::string_view s);

// `s` single-quoted for /bin/sh: one word, whatever it holds.
std::string ShellQuote(std::string_view s);

// The pieces of `s` between `separator`s ("a,,b" -> "a", "", "b"; "" -> one empty piece).
std::vector<std::string> SplitString(std::string_view s, char separator);
// `parts` with `separator` between them.
std::string JoinStrings(const std::vector<std::string>& parts, std::string_view separator);

// Whether `s` ends with `tail`.
inline bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The shortest text that reads back as `value` ("0.1", "5", "1e-07").
std::string FormatDouble(double value);

}  // namespace reel
