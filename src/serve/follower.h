// Hot reload: keeps served models on the versions their registry references point at. A model
// served from models:/name@alias (or a branch, models:/name/branch/b) is followed: when the
// reference moves, the new version is loaded and warmed up in the background while the old one
// serves, then Service::Swap switches to it at once and drains and unloads the old one.
//
// A version that fails to load is logged and skipped (the old one keeps serving) until the
// reference moves again. A fixed version (models:/name/4) and files are not followed.
// Thread-safety: Poll, Start and Stop may be called from any thread; polls never overlap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "serve/batcher.h"
#include "serve/model.h"
#include "serve/service.h"

namespace reel::serve {

struct FollowedModel {
  std::string name;    // as served
  std::string source;  // a moving models:/ reference
  Service::Role role = Service::Role::kPrimary;
  BatcherOptions batching;
  std::string version;  // the version served now
};

// The version a models:/ reference points at now.
using ResolveFn = std::function<Result<int64_t>(const std::string& uri)>;
// A fixed version (models:/name/4), loaded and warmed up.
using LoadFn = std::function<Result<std::unique_ptr<Model>>(const std::string& uri)>;

// True for references that can move: aliases and branches.
bool IsMovingReference(const std::string& source);

class Follower {
 public:
  Follower(Service* service, ResolveFn resolve, LoadFn load);
  ~Follower();  // Stop()
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  void Add(FollowedModel model);

  struct PollResult {
    int swapped = 0;
    std::vector<Status> errors;  // one per model that could not be resolved, loaded or swapped
  };
  // Resolves every followed reference once; each that moved is loaded and swapped in.
  PollResult Poll();

  // Polls every `interval` on a thread of its own until Stop.
  void Start(std::chrono::milliseconds interval);
  void Stop();

 private:
  Status Follow(FollowedModel& model, bool* swapped);

  Service* const service_;
  const ResolveFn resolve_;
  const LoadFn load_;
  std::mutex poll_mu_;  // one poll at a time
  std::vector<FollowedModel> models_;
  std::vector<std::string> failed_;  // per model: the version that failed to load, skipped
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace reel::serve
