#include "parallel/ps_server.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "base/strings.h"
#include "http/server.h"
#include "parallel/ps_wire.h"

namespace reel::parallel {

std::string PsShardState::ToJson() const {
  nlohmann::json j = {{"version", version}, {"pushed", pushed}, {"done", done}};
  return j.dump();
}

PsShardState PsShardState::Fresh(int workers) {
  PsShardState s;
  s.pushed.assign(static_cast<size_t>(workers), 0);
  s.done.assign(static_cast<size_t>(workers), false);
  return s;
}

Result<PsShardState> PsShardState::FromJson(const std::string& text, int workers,
                                            const std::string& what) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    PsShardState s;
    s.version = j.at("version").get<int64_t>();
    s.pushed = j.at("pushed").get<std::vector<int64_t>>();
    s.done = j.at("done").get<std::vector<bool>>();
    if (s.pushed.size() != static_cast<size_t>(workers) || s.done.size() != s.pushed.size()) {
      return DataLossError(what + " is a shard of a job with " + std::to_string(s.pushed.size()) +
                           " workers, not " + std::to_string(workers));
    }
    return s;
  } catch (const std::exception& e) {
    return DataLossError(what + ": not a parameter-server state: " + e.what());
  }
}

struct ParameterServer::Impl {
  ParameterServerOptions o;
  std::vector<at::Tensor> params, buffers;
  std::vector<at::Tensor> grad_sum, buffer_sum, scratch, buffer_scratch;
  Update update;
  Snapshot snapshot;
  mutable std::mutex mu;
  std::condition_variable changed;
  PsShardState state;
  int arrived = 0;  // bsp: workers whose gradient of this round is summed
  int finite = 0;   // of them, with a finite gradient
  bool closing = false;
  PsServerStats stats;
  std::unique_ptr<http::Server> server;

  int64_t Slowest() const { return *std::min_element(state.pushed.begin(), state.pushed.end()); }
  bool AllDone() const {
    return std::all_of(state.done.begin(), state.done.end(), [](bool d) { return d; });
  }

  // The worker and step of a request, or the 400 answer naming what is wrong.
  Result<int> Worker(const http::Request& r) const {
    auto it = r.query.find("worker");
    auto w = it == r.query.end() ? std::nullopt : ParseInt64(it->second);
    if (!w || *w < 0 || *w >= o.workers) {
      return InvalidArgumentError("parameter server: 'worker' must be 0.." +
                                  std::to_string(o.workers - 1));
    }
    return static_cast<int>(*w);
  }
  static Result<int64_t> Step(const http::Request& r) {
    auto it = r.query.find("step");
    auto s = it == r.query.end() ? std::nullopt : ParseInt64(it->second);
    if (!s || *s < 0) return InvalidArgumentError("parameter server: 'step' must be a step >= 0");
    return *s;
  }

  http::Response State(const http::Request& r) {
    auto worker = Worker(r);
    if (!worker.ok()) return http::Response::Error(worker.status());
    std::lock_guard<std::mutex> lock(mu);
    return http::Response::Json(200, {{"shard", o.shard},
                                      {"version", state.version},
                                      {"pushed", state.pushed[static_cast<size_t>(*worker)]},
                                      {"slowest", Slowest()},
                                      {"done", AllDone()}});
  }

  // True when worker `w` may read the shard for step `step`.
  bool Ready(int64_t step) const {
    if (o.sync == PsSync::kBsp) return state.version >= step;
    return Slowest() >= step - o.staleness;
  }

  http::Response Pull(const http::Request& r) {
    auto worker = Worker(r);
    if (!worker.ok()) return http::Response::Error(worker.status());
    auto step = Step(r);
    if (!step.ok()) return http::Response::Error(step.status());
    std::unique_lock<std::mutex> lock(mu);
    const auto deadline = std::chrono::steady_clock::now() + o.max_wait;
    const size_t w = static_cast<size_t>(*worker);
    while (true) {
      if (closing) return Busy("the parameter server is stopping");
      if (state.pushed[w] < *step) return AskResend(w, *step);
      if (Ready(*step)) break;
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout && !Ready(*step)) {
        return Busy("step " + std::to_string(*step) + " waits for the slowest worker (at step " +
                    std::to_string(Slowest()) + ")");
      }
    }
    http::Response answer;
    answer.body.reserve(ps_wire::Bytes(params) + ps_wire::Bytes(buffers));
    for (const auto& t : params) ps_wire::Append(&answer.body, t);
    for (const auto& t : buffers) ps_wire::Append(&answer.body, t);
    answer.headers["Content-Type"] = "application/octet-stream";
    answer.headers["X-Reel-Version"] = std::to_string(state.version);
    answer.headers["X-Reel-Slowest"] = std::to_string(Slowest());
    ++stats.pulls;
    stats.bytes_out += answer.body.size();
    return answer;
  }

  static http::Response Busy(const std::string& why) {
    http::Response r = http::Response::Error(503, UnavailableError(why));
    r.headers["Retry-After"] = "0";
    return r;
  }

  http::Response AskResend(size_t w, int64_t step) {
    ++stats.resends_asked;
    http::Response r =
        http::Response::Error(409, FailedPreconditionError("worker " + std::to_string(w) +
                                                           " pulls step " + std::to_string(step) +
                                                           " but this shard has its gradients "
                                                           "only up to step " +
                                                           std::to_string(state.pushed[w] - 1)));
    r.headers["X-Reel-Resend"] = std::to_string(state.pushed[w]);
    return r;
  }

  http::Response Push(const http::Request& r) {
    auto worker = Worker(r);
    if (!worker.ok()) return http::Response::Error(worker.status());
    auto step = Step(r);
    if (!step.ok()) return http::Response::Error(step.status());
    const uint64_t expected = ps_wire::Bytes(params) + ps_wire::Bytes(buffers);
    if (r.body.size() != expected) {
      return http::Response::Error(InvalidArgumentError(
          "parameter server shard " + std::to_string(o.shard) + ": a push of " +
          std::to_string(r.body.size()) + " bytes, expected " + std::to_string(expected)));
    }
    const bool is_finite = r.query.count("finite") == 0 || r.query.at("finite") != "0";
    std::lock_guard<std::mutex> lock(mu);
    const size_t w = static_cast<size_t>(*worker);
    stats.bytes_in += r.body.size();
    if (*step < state.pushed[w]) {
      ++stats.duplicates;
      return http::Response::Json(200, {{"version", state.version}, {"duplicate", true}});
    }
    if (*step > state.pushed[w] || (o.sync == PsSync::kBsp && *step != state.version)) {
      return http::Response::Error(
          409,
          FailedPreconditionError("worker " + std::to_string(w) + " pushed step " +
                                  std::to_string(*step) + "; shard " + std::to_string(o.shard) +
                                  " expects its step " + std::to_string(state.pushed[w]) +
                                  " (version " + std::to_string(state.version) + ")"));
    }
    ReadBody(r.body);
    ++stats.pushes;
    Status applied = o.sync == PsSync::kBsp ? AddToRound(w, is_finite) : ApplyNow(w, is_finite);
    if (!applied.ok()) return http::Response::Error(applied);
    return http::Response::Json(200, {{"version", state.version}});
  }

  void ReadBody(const std::string& body) {
    const char* in = body.data();
    for (auto& t : scratch) in = ps_wire::CopyInto(in, t);
    for (auto& t : buffer_scratch) in = ps_wire::CopyInto(in, t);
  }

  // BSP: sums this worker's gradient into the round; the last worker's push applies the mean.
  Status AddToRound(size_t w, bool is_finite) {
    if (is_finite) {
      for (size_t i = 0; i < params.size(); ++i) grad_sum[i].add_(scratch[i]);
      ++finite;
    }
    for (size_t i = 0; i < buffers.size(); ++i) buffer_sum[i].add_(buffer_scratch[i]);
    state.pushed[w] += 1;
    if (++arrived < o.workers) return Status::Ok();
    for (size_t i = 0; i < buffers.size(); ++i) {
      buffers[i].copy_(buffer_sum[i].div(o.workers));
      buffer_sum[i].zero_();
    }
    Status status = Status::Ok();
    if (finite > 0) {
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].mutable_grad() = grad_sum[i].div(finite);
        grad_sum[i].zero_();
      }
      status = update(state.version);
    }
    arrived = finite = 0;
    return Publish(status);
  }

  // SSP: this worker's gradient, scaled by 1/workers, applies at once; its buffers replace ours.
  Status ApplyNow(size_t w, bool is_finite) {
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffer_scratch[i]);
    state.pushed[w] += 1;
    Status status = Status::Ok();
    if (is_finite) {
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].mutable_grad() = scratch[i].div(o.workers);
      }
      status = update(state.version / o.workers);
    }
    return Publish(status);
  }

  // A new version: snapshot first, so no worker sees a version a restart would lose.
  Status Publish(const Status& updated) {
    REEL_RETURN_IF_ERROR(updated);
    state.version += 1;
    REEL_RETURN_IF_ERROR(snapshot(state));
    changed.notify_all();
    return Status::Ok();
  }

  http::Response Done(const http::Request& r) {
    auto worker = Worker(r);
    if (!worker.ok()) return http::Response::Error(worker.status());
    std::lock_guard<std::mutex> lock(mu);
    if (!state.done[static_cast<size_t>(*worker)]) {
      state.done[static_cast<size_t>(*worker)] = true;
      Status saved = snapshot(state);
      if (!saved.ok()) return http::Response::Error(saved);
      changed.notify_all();
    }
    return http::Response::Json(200, {{"version", state.version}, {"done", AllDone()}});
  }

  Status CheckTensors() const {
    for (const auto* list : {&params, &buffers}) {
      for (const auto& t : *list) {
        if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) {
          return InvalidArgumentError("parameter server: tensors must be contiguous CPU tensors");
        }
      }
    }
    return Status::Ok();
  }

  void MakeScratch() {
    for (const auto& p : params) {
      grad_sum.push_back(at::zeros_like(p));
      scratch.push_back(at::empty_like(p));
    }
    for (const auto& b : buffers) {
      buffer_sum.push_back(at::zeros_like(b, b.options().dtype(at::kDouble)));
      buffer_scratch.push_back(at::empty_like(b));
    }
  }

  Status Serve() {
    http::Router router;
    REEL_RETURN_IF_ERROR(
        router.Add("GET", "/ps/v1/state", [this](const http::Request& r) { return State(r); }));
    REEL_RETURN_IF_ERROR(
        router.Add("GET", "/ps/v1/pull", [this](const http::Request& r) { return Pull(r); }));
    REEL_RETURN_IF_ERROR(
        router.Add("POST", "/ps/v1/push", [this](const http::Request& r) { return Push(r); }));
    REEL_RETURN_IF_ERROR(
        router.Add("POST", "/ps/v1/done", [this](const http::Request& r) { return Done(r); }));
    http::ServerOptions so;
    so.host = o.host;
    so.port = o.port;
    so.threads = 2;
    so.handler_threads = 2 * o.workers + 2;  // a pull per worker may wait
    so.max_body_bytes =
        std::max<uint64_t>(so.max_body_bytes, ps_wire::Bytes(params) + ps_wire::Bytes(buffers) + 1);
    so.read_timeout = std::chrono::milliseconds(120'000);
    REEL_ASSIGN_OR_RETURN(server, http::Server::Start(so, std::move(router)));
    return Status::Ok();
  }
};

ParameterServer::ParameterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ParameterServer::~ParameterServer() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->closing = true;
    impl_->changed.notify_all();
  }
  if (impl_->server) impl_->server->Shutdown(std::chrono::seconds(5));
}

Result<std::unique_ptr<ParameterServer>> ParameterServer::Start(ParameterServerOptions options,
                                                                std::vector<at::Tensor> parameters,
                                                                std::vector<at::Tensor> buffers,
                                                                PsShardState initial, Update update,
                                                                Snapshot snapshot) {
  if (options.workers < 1 || options.staleness < 0 || options.max_wait.count() <= 0 || !update ||
      !snapshot) {
    return InvalidArgumentError(
        "parameter server: need workers >= 1, staleness >= 0, a positive max_wait, an update and "
        "a snapshot");
  }
  if (initial.pushed.size() != static_cast<size_t>(options.workers) ||
      initial.done.size() != initial.pushed.size()) {
    return InvalidArgumentError("parameter server: the initial state is for " +
                                std::to_string(initial.pushed.size()) + " workers, not " +
                                std::to_string(options.workers));
  }
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  impl->params = std::move(parameters);
  impl->buffers = std::move(buffers);
  impl->state = std::move(initial);
  impl->update = std::move(update);
  impl->snapshot = std::move(snapshot);
  REEL_RETURN_IF_ERROR(impl->CheckTensors());
  impl->MakeScratch();
  REEL_RETURN_IF_ERROR(impl->Serve());
  return std::unique_ptr<ParameterServer>(new ParameterServer(std::move(impl)));
}

std::string ParameterServer::address() const { return impl_->server->address(); }

Status ParameterServer::Wait(const std::function<bool()>& stop, std::chrono::milliseconds poll) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  while (!impl_->AllDone()) {
    if (stop && stop())
      return CancelledError("parameter server stopped before every worker finished");
    impl_->changed.wait_for(lock, poll);
  }
  return Status::Ok();
}

PsShardState ParameterServer::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->state;
}

PsServerStats ParameterServer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace reel::parallel
