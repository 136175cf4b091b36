#include "base/build_info.h"

// Set on this file only (src/base/CMakeLists.txt), so that a new commit recompiles one file.
#ifndef REEL_BUILD_VERSION
#define REEL_BUILD_VERSION "unknown"
#endif
#ifndef REEL_BUILD_GIT_COMMIT
#define REEL_BUILD_GIT_COMMIT "unknown"
#endif
#ifndef REEL_BUILD_GIT_DIRTY
#define REEL_BUILD_GIT_DIRTY 0
#endif

namespace reel {

const BuildInfo& GetBuildInfo() {
  static const BuildInfo info{REEL_BUILD_VERSION, REEL_BUILD_GIT_COMMIT, REEL_BUILD_GIT_DIRTY != 0};
  return info;
}

}  // namespace reel
