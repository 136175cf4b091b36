// Test support: run a shell command, quote for /bin/sh.
// Tests only; header-only.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "base/strings.h"

namespace reel::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the command could not run or was killed by a signal
  std::string output;  // stdout (stderr too when the command redirects it)
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

using ::reel::ShellQuote;  // base/strings.h

}  // namespace reel::testing
