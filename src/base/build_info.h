// Which Reel this is: the version and the git commit the build was configured from (with a flag
// for uncommitted changes), recorded with every registered model version.
// The commit is read when CMake configures; "unknown" outside a git checkout or without git.
// Thread-safety: constants.
#pragma once

#include <string>

namespace reel {

struct BuildInfo {
  std::string version;     // the project's version, e.g. "0.1.0"
  std::string git_commit;  // 40 hex digits, or "unknown"
  bool git_dirty = false;  // the checkout had changes that were not committed
};

const BuildInfo& GetBuildInfo();

}  // namespace reel
