// The storage tests' names for the shared test helpers (testing/temp_dir.h).
#pragma once

#include "testing/temp_dir.h"

namespace reel::storage::testing {

using reel::testing::FileExists;
using reel::testing::FilesUnder;
using reel::testing::RandomBytes;
using reel::testing::ReadFile;
using reel::testing::TempDir;
using reel::testing::WriteFile;

}  // namespace reel::storage::testing
