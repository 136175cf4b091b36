// Waiting for what no sync point can reach (another process, a server): poll a condition until
// it holds, with a deadline. Tests only.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace reel::testing {

// True as soon as `condition` holds; false when it still does not after `timeout`.
inline bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace reel::testing
