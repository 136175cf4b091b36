#include "base/sync_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

namespace reel {

SyncPoint& SyncPoint::Get() {
  static SyncPoint* instance = new SyncPoint;  // never destroyed: points may run at exit
  return *instance;
}

void SyncPoint::LoadDependencies(const std::vector<Dependency>& dependencies) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& d : dependencies) predecessors_[d.successor].push_back(d.predecessor);
}

void SyncPoint::SetCallback(const std::string& point, std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_[point] = std::move(callback);
}

void SyncPoint::Reset() {
  enabled_.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  predecessors_.clear();
  callbacks_.clear();
  passed_.clear();
  cv_.notify_all();
}

int SyncPoint::Count(const std::string& point) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = passed_.find(point);
  return it == passed_.end() ? 0 : it->second;
}

void SyncPoint::Process(const std::string& point) {
  std::function<void()> callback;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto all_passed = [&] {
      if (!enabled()) return true;  // a Reset releases every waiter
      auto it = predecessors_.find(point);
      if (it == predecessors_.end()) return true;
      for (const auto& p : it->second) {
        if (passed_.count(p) == 0) return false;
      }
      return true;
    };
    cv_.wait(lock, all_passed);
    auto cb = callbacks_.find(point);
    if (cb != callbacks_.end()) callback = cb->second;
  }
  if (callback) callback();
  std::lock_guard<std::mutex> lock(mu_);
  ++passed_[point];
  cv_.notify_all();
}

Status SyncPoint::CrashAtFromEnv() {
  const char* spec = std::getenv("REEL_CRASH_AT");
  if (spec == nullptr || *spec == '\0') return Status::Ok();
  const std::string text(spec);
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const long n = colon == std::string::npos ? 0 : std::strtol(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || *end != '\0' || n < 1) {
    return InvalidArgumentError("REEL_CRASH_AT='" + text + "': expected POINT:N with N >= 1");
  }
  auto left = std::make_shared<long>(n);
  SetCallback(text.substr(0, colon), [left] {
    if (--*left == 0) ::kill(::getpid(), SIGKILL);
  });
  EnableProcessing();
  return Status::Ok();
}

}  // namespace reel
