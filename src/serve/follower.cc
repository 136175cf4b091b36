#include "serve/follower.h"

#include <utility>

#include "base/logging.h"
#include "registry/model_uri.h"

namespace reel::serve {

bool IsMovingReference(const std::string& source) {
  if (!registry::IsModelUri(source)) return false;
  const Result<registry::ModelRef> ref = registry::ParseModelUri(source);
  return ref.ok() && ref->kind != registry::ModelRef::Kind::kVersion;
}

Follower::Follower(Service* service, ResolveFn resolve, LoadFn load)
    : service_(service), resolve_(std::move(resolve)), load_(std::move(load)) {}

Follower::~Follower() { Stop(); }

void Follower::Add(FollowedModel model) {
  std::lock_guard lock(poll_mu_);
  models_.push_back(std::move(model));
  failed_.emplace_back();
}

Follower::PollResult Follower::Poll() {
  std::lock_guard lock(poll_mu_);
  PollResult result;
  for (FollowedModel& model : models_) {
    bool swapped = false;
    if (Status s = Follow(model, &swapped); !s.ok()) result.errors.push_back(std::move(s));
    result.swapped += swapped ? 1 : 0;
  }
  return result;
}

// One model: resolve, and when the reference moved to a version not known to fail, load it
// (the old version serves meanwhile) and swap it in.
Status Follower::Follow(FollowedModel& model, bool* swapped) {
  std::string& failed = failed_[static_cast<size_t>(&model - models_.data())];
  REEL_ASSIGN_OR_RETURN(const int64_t version, resolve_(model.source));
  const std::string now = std::to_string(version);
  if (now == model.version || now == failed) return Status::Ok();
  const registry::ModelRef ref = *registry::ParseModelUri(model.source);
  const std::string uri = registry::VersionUri(ref.model, version);
  Result<std::unique_ptr<Model>> loaded = load_(uri);
  Status s = loaded.ok()
                 ? service_->Swap(model.name, std::move(*loaded), model.batching, model.role)
                 : loaded.status();
  if (!s.ok()) {
    failed = now;
    return Status(s.code(), model.source + " moved to version " + now +
                                ", which was not swapped in (version " + model.version +
                                " keeps serving): " + s.message());
  }
  Logger("serve")->info("{} now serves version {} of {} (was {})", model.name, now, model.source,
                        model.version);
  model.version = now;
  *swapped = true;
  return Status::Ok();
}

void Follower::Start(std::chrono::milliseconds interval) {
  thread_ = std::thread([this, interval] {
    std::unique_lock lock(stop_mu_);
    while (!stop_cv_.wait_for(lock, interval, [&] { return stopping_; })) {
      lock.unlock();
      for (const Status& s : Poll().errors) Logger("serve")->warn("{}", s.message());
      lock.lock();
    }
  });
}

void Follower::Stop() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace reel::serve
