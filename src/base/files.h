// Reading and writing a whole file, with the errors every caller wants the same: a missing or
// unreadable file is NotFound naming it, a read or write that fails part-way Unavailable.
// Thread-safety: pure functions of the file system.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace reel {

// The bytes of `path`. `what` names the file in errors: "training config 'a.yaml' cannot be
// read".
Result<std::string> ReadFileToString(const std::string& path, std::string_view what = "file");

// Writes `bytes` to PATH.tmp, then renames it over `path`: a reader sees the old file or the
// whole new one, never a part.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace reel
