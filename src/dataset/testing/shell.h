// Test support for the dataset tests: the shared shell helpers. Tests only.
#pragma once

#include "testing/shell.h"

namespace reel::dataset::testing {

using reel::testing::CommandResult;
using reel::testing::RunCommand;
using reel::testing::ShellQuote;

}  // namespace reel::dataset::testing
