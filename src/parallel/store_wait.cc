#include "parallel/store_wait.h"

#include <algorithm>
#include <thread>

#include "base/sync_point.h"

namespace reel::parallel {

bool WaitForKeys(c10d::Store& store, const std::vector<std::string>& keys,
                 std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    if (store.check(keys)) return true;
    REEL_SYNC_POINT("WaitForKeys:Missing");
    const auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace reel::parallel
