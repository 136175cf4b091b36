// Time as a dependency: code that decides by elapsed time (redraw intervals, timeouts, LRU ages)
// takes a Clock so that tests can move time by hand instead of sleeping.
//
// Thread-safety: every Clock may be used from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace reel {

// Seconds of the steady clock since `start`: for measuring, not deciding (that takes a Clock).
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "2026-11-29T16:20:01.123Z": UTC, millisecond precision (logs, registry records).
std::string FormatIso8601Utc(std::chrono::system_clock::time_point time);

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  virtual void SleepFor(Duration d) = 0;

  // The process's steady clock; never destroyed.
  static Clock* System();
};

// A clock that moves only when told to; SleepFor advances it at once. For tests.
class FakeClock : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{} + std::chrono::hours(1))
      : now_(start.time_since_epoch().count()) {}
  TimePoint Now() const override { return TimePoint(Duration(now_.load())); }
  void SleepFor(Duration d) override { Advance(d); }
  void Advance(Duration d) { now_.fetch_add(d.count()); }

 private:
  std::atomic<Duration::rep> now_;
};

}  // namespace reel
