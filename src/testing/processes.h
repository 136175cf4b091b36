// Test support: run one body in several forked processes at once (concurrent writers from
// several processes). Header-only; tests only.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

namespace reel::testing {

// Forks `n` children that run body(i) and _exit with its result, waits for all of them, and
// returns how many did not exit 0. The body must not return into the test (gtest is not
// fork-safe), which _exit guarantees.
inline int FailedChildren(int n, const std::function<int(int)>& body) {
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) _exit(body(i));
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  return failed;
}

}  // namespace reel::testing
