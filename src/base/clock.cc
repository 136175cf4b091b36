#include "base/clock.h"

namespace reel {
namespace {

class SystemClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  void SleepFor(Duration d) override { std::this_thread::sleep_for(d); }
};

}  // namespace

Clock* Clock::System() {
  static SystemClock* clock = new SystemClock;
  return clock;
}

}  // namespace reel
