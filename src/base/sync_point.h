// Named points in product code that tests can order and hook into, as RocksDB's SyncPoint: a
// test says "thread B's point Y waits until some thread has passed point X", or runs a callback
// at a point, instead of sleeping and hoping the other thread got there first.
//
//   // product code
//   REEL_SYNC_POINT("ThreadPool::~ThreadPool:Stopping");
//   // test
//   SyncPoint& sp = SyncPoint::Get();
//   sp.SetCallback("ThreadPool::~ThreadPool:Stopping", [&] { gate.set_value(); });
//   sp.EnableProcessing();
//   ...
//   sp.Reset();  // disables processing, clears dependencies, callbacks and the record
//
// When processing is disabled (always, outside tests that enable it) a point costs one relaxed
// atomic load. Thread-safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel {

class SyncPoint {
 public:
  static SyncPoint& Get();

  // Each pair {predecessor, successor}: a thread reaching `successor` waits until some thread
  // has passed `predecessor`.
  struct Dependency {
    std::string predecessor;
    std::string successor;
  };
  void LoadDependencies(const std::vector<Dependency>& dependencies);

  // Runs `callback` on the thread that reaches `point`, each time, before its dependents go on.
  void SetCallback(const std::string& point, std::function<void()> callback);

  void EnableProcessing() { enabled_.store(true, std::memory_order_release); }
  void Reset();

  // How many times `point` was passed since processing was enabled.
  int Count(const std::string& point) const;

  // For crash tests across processes: when $REEL_CRASH_AT is "POINT:N", the process kills
  // itself with SIGKILL (as `kill -9` would) the N-th time it reaches POINT. A command calls this
  // once at start; without the variable it does nothing. InvalidArgument for a malformed value.
  Status CrashAtFromEnv();

  // Called by REEL_SYNC_POINT.
  void Process(const std::string& point);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> enabled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::string>> predecessors_;
  std::map<std::string, std::function<void()>> callbacks_;
  std::map<std::string, int> passed_;
};

}  // namespace reel

#define REEL_SYNC_POINT(name)                                                       \
  do {                                                                              \
    if (::reel::SyncPoint::Get().enabled()) ::reel::SyncPoint::Get().Process(name); \
  } while (0)
