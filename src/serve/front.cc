#include "serve/front.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "http/client.h"

namespace reel::serve {
namespace {

using http::Request;
using http::Response;

// One replica in the front's table, with its outstanding requests and idle connections.
struct Slot {
  int id = 0;
  std::unique_ptr<Replica> replica;
  std::atomic<int> in_flight{0};
  std::atomic<int64_t> answered{0};
  bool draining = false;  // guarded by Front::Impl::mu
  bool dead = false;      // guarded by Front::Impl::mu: seen dead by a request, not yet reaped

  std::mutex pool_mu;
  std::vector<http::Client> idle;  // guarded by pool_mu

  Result<http::Client> TakeClient(std::chrono::milliseconds timeout) {
    {
      std::lock_guard lock(pool_mu);
      if (!idle.empty()) {
        http::Client c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    http::ClientOptions options;
    options.timeout = timeout;
    return http::Client::Make(replica->url(), options);
  }
  void ReturnClient(http::Client client) {
    std::lock_guard lock(pool_mu);
    idle.push_back(std::move(client));
  }
};

// The headers a replica needs to read the request as the client sent it.
http::Headers ForwardedHeaders(const Request& request) {
  http::Headers headers;
  for (const char* name : {"Authorization", "Inference-Header-Content-Length", "Accept"}) {
    const std::string value = request.Header(name);
    if (!value.empty()) headers[name] = value;
  }
  return headers;
}

}  // namespace

struct Front::Impl {
  FrontOptions options;
  StartReplicaFn start;
  Clock* clock;
  Autoscaler autoscaler{options.scale};

  mutable std::mutex mu;
  std::vector<std::shared_ptr<Slot>> slots;  // guarded by mu
  int next_id = 0;                           // guarded by mu
  int desired = 0;                           // guarded by mu

  // Load since the last tick: answered requests' summed latency, and their count.
  std::atomic<int64_t> busy_us{0}, answered{0};
  Clock::TimePoint last_tick;
  std::atomic<int64_t> requests{0}, failovers{0}, unavailable{0}, restarts{0};

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;  // guarded by stop_mu
  std::thread scaler;

  Impl(FrontOptions o, StartReplicaFn s, Clock* c)
      : options(o), start(std::move(s)), clock(c), last_tick(c->Now()) {}

  // The serving replica with the fewest outstanding requests, not among `tried`; its count is
  // taken here, under the lock, so concurrent picks spread.
  std::shared_ptr<Slot> Pick(const std::vector<int>& tried) {
    std::lock_guard lock(mu);
    std::shared_ptr<Slot> best;
    for (const auto& slot : slots) {
      if (slot->draining || slot->dead || std::count(tried.begin(), tried.end(), slot->id)) {
        continue;
      }
      if (!best || slot->in_flight < best->in_flight) best = slot;
    }
    if (best) ++best->in_flight;
    return best;
  }

  Response Proxy(const Request& request) {
    ++requests;
    const auto start_time = clock->Now();
    std::vector<int> tried;
    while (true) {
      std::shared_ptr<Slot> slot = Pick(tried);
      if (!slot) {
        ++unavailable;
        Response r = Response::Error(UnavailableError(
            tried.empty() ? "no replica is serving" : "every replica failed this request"));
        r.headers["Retry-After"] = "1";
        return r;
      }
      Result<Response> answer = Forward(*slot, request);
      --slot->in_flight;
      if (answer.ok()) {
        ++slot->answered;
        ++answered;
        busy_us += std::chrono::duration_cast<std::chrono::microseconds>(clock->Now() - start_time)
                       .count();
        return std::move(*answer);
      }
      if (answer.status().code() == StatusCode::kDeadlineExceeded) {
        return Response::Error(answer.status());
      }
      Logger("serve")->warn("replica {} failed a request ({}); trying another",
                            slot->replica->name(), answer.status().message());
      ++failovers;
      tried.push_back(slot->id);
      if (!slot->replica->Alive()) {  // no more requests for it; the next tick replaces it
        std::lock_guard lock(mu);
        slot->dead = true;
      }
    }
  }

  Result<Response> Forward(Slot& slot, const Request& request) {
    REEL_ASSIGN_OR_RETURN(http::Client client, slot.TakeClient(options.request_timeout));
    Result<Response> answer =
        client.Send(request.method, request.target, request.body, request.Header("Content-Type"),
                    ForwardedHeaders(request));
    if (answer.ok()) slot.ReturnClient(std::move(client));
    return answer;
  }

  bool Ready() const {
    std::lock_guard lock(mu);
    return std::any_of(slots.begin(), slots.end(),
                       [](const auto& s) { return !s->draining && !s->dead; });
  }

  int Serving() const {
    std::lock_guard lock(mu);
    return static_cast<int>(
        std::count_if(slots.begin(), slots.end(), [](const auto& s) { return !s->draining; }));
    // The dead count until reaped: the autoscaler sees the replicas it asked for.
  }

  Status AddOne() {
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<Replica> replica, start());
    auto slot = std::make_shared<Slot>();
    slot->replica = std::move(replica);
    std::lock_guard lock(mu);
    slot->id = next_id++;
    Logger("serve")->info("replica {} serves at {}", slot->replica->name(), slot->replica->url());
    slots.push_back(std::move(slot));
    return Status::Ok();
  }

  // Takes out the dead and the drained surplus; returns how many died.
  int Reap() {
    std::vector<std::shared_ptr<Slot>> gone;
    int dead = 0;
    {
      std::lock_guard lock(mu);
      for (auto it = slots.begin(); it != slots.end();) {
        const bool died = (*it)->dead || !(*it)->replica->Alive();
        if (died || ((*it)->draining && (*it)->in_flight == 0)) {
          if (died && !(*it)->draining) {
            Logger("serve")->warn("replica {} died", (*it)->replica->name());
            ++dead;
          }
          gone.push_back(std::move(*it));
          it = slots.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const auto& slot : gone) slot->replica->Stop(options.stop_grace);
    return dead;
  }

  LoadSample Measure(int serving) {
    const Clock::TimePoint now = clock->Now();
    const double period_us = std::max<double>(
        1, std::chrono::duration_cast<std::chrono::microseconds>(now - last_tick).count());
    last_tick = now;
    const int64_t busy = busy_us.exchange(0), n = answered.exchange(0);
    int outstanding = 0;
    {
      std::lock_guard lock(mu);
      for (const auto& slot : slots) outstanding += slot->in_flight;
    }
    LoadSample load;
    // Little's law over the period, or what is outstanding now if more (long requests).
    const double mean_in_flight = std::max(busy / period_us, static_cast<double>(outstanding));
    load.in_flight_per_replica = mean_in_flight / std::max(1, serving);
    load.latency_ms = n > 0 ? busy / 1000.0 / static_cast<double>(n) : 0;
    return load;
  }

  // Marks `count` serving replicas draining, those with the fewest outstanding requests first.
  void Drain(int count) {
    std::lock_guard lock(mu);
    std::vector<std::shared_ptr<Slot>> serving;
    for (const auto& s : slots) {
      if (!s->draining) serving.push_back(s);
    }
    std::stable_sort(serving.begin(), serving.end(),
                     [](const auto& a, const auto& b) { return a->in_flight < b->in_flight; });
    for (int i = 0; i < count && i < static_cast<int>(serving.size()); ++i) {
      serving[static_cast<size_t>(i)]->draining = true;
      Logger("serve")->info("replica {} drains (scaling down)",
                            serving[static_cast<size_t>(i)]->replica->name());
    }
  }
};

Result<std::unique_ptr<Front>> Front::Start(FrontOptions options, StartReplicaFn start,
                                            Clock* clock) {
  REEL_RETURN_IF_ERROR(options.scale.Validate());
  auto impl = std::make_unique<Impl>(options, std::move(start), clock);
  std::unique_ptr<Front> front(new Front(std::move(impl)));
  for (int i = 0; i < front->impl_->options.scale.min_replicas; ++i) {
    REEL_RETURN_IF_ERROR(front->impl_->AddOne());
  }
  front->impl_->desired = front->impl_->options.scale.min_replicas;
  return front;
}

Front::Front(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Front::~Front() { Shutdown(); }

TickResult Front::Tick() {
  Impl& f = *impl_;
  TickResult result;
  result.replaced = f.Reap();
  const int serving = f.Serving();
  result.load = f.Measure(serving);
  result.desired = f.autoscaler.Recommend(f.clock->Now(), serving, result.load);
  {
    std::lock_guard lock(f.mu);
    f.desired = result.desired;
  }
  if (result.desired < serving) f.Drain(serving - result.desired);
  int started = 0;
  for (int i = serving; i < result.desired; ++i, ++started) {
    if (Status s = f.AddOne(); !s.ok()) {
      Logger("serve")->error("a replica did not start: {}", s.message());
      break;
    }
  }
  f.restarts += std::min(started, result.replaced);
  result.replicas = f.Serving();
  return result;
}

void Front::RunScaling() {
  impl_->scaler = std::thread([this] {
    Impl& f = *impl_;
    std::unique_lock lock(f.stop_mu);
    while (!f.stop_cv.wait_for(lock, f.options.period, [&] { return f.stopping; })) {
      lock.unlock();
      Tick();
      lock.lock();
    }
  });
}

void Front::Shutdown() {
  Impl& f = *impl_;
  {
    std::lock_guard lock(f.stop_mu);
    f.stopping = true;
  }
  f.stop_cv.notify_all();
  if (f.scaler.joinable()) f.scaler.join();
  std::vector<std::shared_ptr<Slot>> all;
  {
    std::lock_guard lock(f.mu);
    all.swap(f.slots);
  }
  for (const auto& slot : all) slot->replica->Stop(f.options.stop_grace);
}

int Front::replicas() const { return impl_->Serving(); }

Status Front::AddRoutes(http::Router* router) {
  Impl* f = impl_.get();
  REEL_RETURN_IF_ERROR(router->Add("GET", "/v2/health/live",
                                   [](const Request&) { return Response::Text(200, ""); }));
  REEL_RETURN_IF_ERROR(router->Add("GET", "/v2/health/ready", [f](const Request&) {
    return f->Ready() ? Response::Text(200, "")
                      : Response::Error(UnavailableError("no replica is serving"));
  }));
  REEL_RETURN_IF_ERROR(router->Add("GET", "/metrics", [this](const Request&) {
    Response r = Response::Text(200, MetricsText());
    r.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8";
    return r;
  }));
  const auto proxy = [f](const Request& r) { return f->Proxy(r); };
  REEL_RETURN_IF_ERROR(router->Add("GET", "/v2/{rest...}", proxy));
  return router->Add("POST", "/v2/{rest...}", proxy);
}

std::string Front::MetricsText() const {
  const Impl& f = *impl_;
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help,
                          const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + value + "\n";
  };
  int desired = 0, outstanding = 0;
  {
    std::lock_guard lock(f.mu);
    desired = f.desired;
    for (const auto& slot : f.slots) outstanding += slot->in_flight;
  }
  metric("reel_front_replicas", "gauge", "Replicas serving", std::to_string(f.Serving()));
  metric("reel_front_replicas_desired", "gauge", "Replicas the autoscaler wants",
         std::to_string(desired));
  metric("reel_front_in_flight", "gauge", "Requests outstanding at replicas",
         std::to_string(outstanding));
  metric("reel_front_requests_total", "counter", "Requests received",
         std::to_string(f.requests.load()));
  metric("reel_front_failovers_total", "counter", "Requests sent again after a replica failed",
         std::to_string(f.failovers.load()));
  metric("reel_front_unavailable_total", "counter", "Requests answered 503: no replica",
         std::to_string(f.unavailable.load()));
  metric("reel_front_replica_restarts_total", "counter", "Dead replicas replaced",
         std::to_string(f.restarts.load()));
  return out;
}

}  // namespace reel::serve
