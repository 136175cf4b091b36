#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <utility>

namespace reel {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);  // at most 10 redraws a second
constexpr const char* kByteUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
constexpr int kLastByteUnit = 6;

// The power of 1024 to show `bytes` in. A value that would print as "1024.0" moves up a unit
// so the number never reads larger than its unit allows.
int ByteUnitFor(double bytes) {
  if (bytes < 1024) return 0;
  int unit = 1;
  double value = bytes / 1024;
  while (value >= 1023.95 && unit < kLastByteUnit) {
    value /= 1024;
    ++unit;
  }
  return unit;
}

std::string FormatInUnit(double bytes, int unit) {
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%.0f", bytes);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f", bytes / std::pow(1024.0, unit));
  }
  return buf;
}

double Sanitize(double value) { return std::isfinite(value) && value > 0 ? value : 0; }

// "120.0/266.0 MiB": both numbers in the total's unit so they compare at a glance.
std::string FormatAmount(uint64_t done, uint64_t total, Progress::Unit unit) {
  if (unit == Progress::Unit::kItems) {
    std::string out = std::to_string(done);
    if (total > 0) out += "/" + std::to_string(total);
    return out;
  }
  if (total == 0) return Progress::FormatBytes(static_cast<double>(done));
  const int scale = ByteUnitFor(static_cast<double>(std::max(done, total)));
  return FormatInUnit(static_cast<double>(done), scale) + "/" +
         FormatInUnit(static_cast<double>(total), scale) + " " + kByteUnits[scale];
}

std::string FormatRate(double per_second, Progress::Unit unit) {
  if (unit == Progress::Unit::kBytes) return Progress::FormatBytes(per_second) + "/s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f/s", per_second);
  return buf;
}

// Best effort: a progress bar that cannot be drawn must not fail the work it reports on.
void WriteToStderr(const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

}  // namespace

Progress::Progress(std::string label, uint64_t total, Unit unit, bool enabled, Clock* clock)
    : label_(std::move(label)),
      total_(total),
      unit_(unit),
      visible_(enabled && isatty(STDERR_FILENO) == 1),
      clock_(clock),
      start_(clock->Now()),
      last_draw_(start_) {}

Progress::~Progress() { Finish(); }

void Progress::Add(uint64_t amount) {
  done_.fetch_add(amount);
  if (!visible_) return;
  // A thread that finds another one drawing skips its redraw instead of queueing behind it;
  // the next Add draws the newer count anyway.
  std::unique_lock<std::mutex> lock(draw_mu_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;
  const auto now = clock_->Now();
  if (now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  Draw(false);
}

void Progress::SetSecondaryName(std::string name) {
  std::lock_guard<std::mutex> lock(draw_mu_);
  secondary_name_ = std::move(name);
}

void Progress::AddSecondary(uint64_t amount) { secondary_.fetch_add(amount); }

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(draw_mu_);
  if (finished_) return;
  finished_ = true;
  if (visible_) Draw(true);
}

// Called with draw_mu_ held.
void Progress::Draw(bool final_line) {
  const double elapsed = std::chrono::duration<double>(clock_->Now() - start_).count();
  const uint64_t done = done_.load();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;

  std::string line = "\r" + label_ + " ";
  if (total_ > 0) {
    char percent[8];
    std::snprintf(percent, sizeof(percent), " %3d%%",
                  static_cast<int>(std::min(100.0, static_cast<double>(done) * 100.0 / total_)));
    line += percent;
  }
  line += " " + FormatAmount(done, total_, unit_);
  line += "  " + FormatRate(rate, unit_);
  if (!secondary_name_.empty()) {
    const uint64_t secondary = secondary_.load();
    line += "  " + std::to_string(secondary) + " " + secondary_name_ + " " +
            FormatRate(elapsed > 0 ? static_cast<double>(secondary) / elapsed : 0, Unit::kItems);
  }
  if (final_line) {
    line += "  in " + FormatDuration(elapsed);
  } else if (total_ > 0 && rate > 0 && done < total_) {
    line += "  ETA " + FormatDuration(static_cast<double>(total_ - done) / rate);
  }
  line += "\x1b[K";  // clear what a longer previous line left behind
  if (final_line) line += "\n";
  WriteToStderr(line);
}

std::string Progress::FormatBytes(double bytes) {
  bytes = Sanitize(bytes);
  const int unit = ByteUnitFor(bytes);
  return FormatInUnit(bytes, unit) + " " + kByteUnits[unit];
}

std::string Progress::FormatDuration(double seconds) {
  if (std::isnan(seconds)) return "-:--";
  // Clamped so that llround stays defined; nobody waits 30 000 years for an ETA.
  seconds = std::clamp(seconds, 0.0, 1e12);
  const long long total = std::llround(seconds);
  const long long hours = total / 3600;
  const long long minutes = total % 3600 / 60;
  const long long secs = total % 60;
  char buf[48];
  if (hours > 0) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", hours, minutes, secs);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", minutes, secs);
  }
  return buf;
}

}  // namespace reel
