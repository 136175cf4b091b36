// Test support for the dataset tests: run a shell command and capture its output. Tests only.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace reel::dataset::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout (stderr too when the command redirects it)
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Single-quotes `s` for /bin/sh.
inline std::string ShellQuote(const std::string& s) {
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

}  // namespace reel::dataset::testing
