// Small string helpers for messages.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace reel {

// `s` made safe to quote in an error message: printable ASCII kept, other bytes as \xNN, cut
// after `max_bytes` bytes with "..." appended.
std::string PrintableForMessage(std::string_view s, size_t max_bytes = 200);

}  // namespace reel
