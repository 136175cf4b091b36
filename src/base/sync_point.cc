#include "base/sync_point.h"

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

}  // namespace reel
