#include "base/clock.h"

#include <cstdio>
#include <ctime>

namespace reel {

std::string FormatIso8601Utc(std::chrono::system_clock::time_point time) {
  using namespace std::chrono;
  // floor, not duration_cast: times before 1970 must not round towards the epoch.
  const auto seconds = floor<std::chrono::seconds>(time);
  const auto millis = duration_cast<milliseconds>(time - seconds).count();
  const std::time_t t = system_clock::to_time_t(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];  // room for any int the compiler can imagine, so no truncation warning
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return buf;
}

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
