// A progress bar for long work on stderr: "label  45% 120.0/266.0 MiB  88.1 MiB/s  ETA 0:02".
// Silent when stderr is not a terminal (CI logs stay clean) or when disabled.
// Thread-safety: Add may be called from several threads; redraws are rate-limited (10 per second).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "base/clock.h"

namespace reel {

class Progress {
 public:
  enum class Unit { kBytes, kItems };

  // total == 0 means unknown (no percentage or ETA). `enabled` false forces silence. `clock`
  // (not owned) times redraws and rates.
  Progress(std::string label, uint64_t total, Unit unit = Unit::kBytes, bool enabled = true,
           Clock* clock = Clock::System());
  ~Progress();  // calls Finish()

  void Add(uint64_t amount);
  // A second counter shown with its own rate after the main one, e.g. clips beside videos:
  // "ingest  40% 120/300  3.1/s  1450 clips 37.6/s  ETA 0:58". Shown once `name` is set.
  void SetSecondaryName(std::string name);
  void AddSecondary(uint64_t amount);
  void Finish();  // draws the final line and a newline once; later calls do nothing

  uint64_t done() const { return done_.load(); }
  bool visible() const { return visible_; }

  // "1.5 MiB", "12.0 KiB", "17 B"
  static std::string FormatBytes(double bytes);
  // "1:02:03" or "2:03"
  static std::string FormatDuration(double seconds);

 private:
  void Draw(bool final_line);

  std::string label_;
  uint64_t total_;
  Unit unit_;
  bool visible_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> secondary_{0};
  std::string secondary_name_;  // guarded by draw_mu_
  Clock* clock_;
  Clock::TimePoint start_;
  Clock::TimePoint last_draw_;
  std::mutex draw_mu_;
  bool finished_ = false;
};

}  // namespace reel
