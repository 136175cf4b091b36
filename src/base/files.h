// Reading and writing a whole file, with the errors every caller wants the same: a missing or
// unreadable file is NotFound naming it, a read or write that fails part-way Unavailable.
// Thread-safety: pure functions of the file system.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel {

// The bytes of `path`. `what` names the file in errors: "training config 'a.yaml' cannot be
// read".
Result<std::string> ReadFileToString(const std::string& path, std::string_view what = "file");

// Writes `bytes` to a temp file of this call's own beside `path` (PATH.tmp.PID.N), then renames
// it over `path`: a reader sees the old file or the whole new one, never a part, even while
// other processes write the same path.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);
// The same with the file's bytes given in pieces, written one after another.
Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& pieces);

// Bytes of the regular files under `dir`, recursively (0 when it does not exist).
uint64_t TreeBytes(const std::string& dir);

// `root` and the folders below it, at most `depth` levels down, that hold a regular file named
// `marker`, sorted. The search does not go into a folder that holds one, nor into folders named
// in `skip` or starting with '.'. Errors: NotFound when `root` is not a folder.
Result<std::vector<std::string>> FindFoldersHolding(const std::string& root,
                                                    const std::string& marker, int depth,
                                                    const std::vector<std::string>& skip = {});

}  // namespace reel
