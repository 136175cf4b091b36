#include "serve/service.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "base/build_info.h"
#include "base/hash.h"
#include "base/strings.h"
#include "loader/clip_transform.h"
#include "serve/infer_io.h"
#include "serve/kserve.h"
#include "storage/open.h"

namespace reel::serve {
namespace {

using Json = nlohmann::json;
using http::Request;
using http::Response;

constexpr const char* kJsonLengthHeader = "Inference-Header-Content-Length";

// The request-duration histogram's upper bounds (µs), from 1 ms to 10 s.
constexpr int64_t kLatencyBoundsUs[] = {1000,   2000,   5000,    10000,   20000,   50000,   100000,
                                        200000, 500000, 1000000, 2000000, 5000000, 10000000};
constexpr size_t kLatencyBuckets = std::size(kLatencyBoundsUs) + 1;

// One served version: its model, its batcher, the counters /metrics reports, and the requests
// in flight on it, which a swap waits for before unloading it.
struct Served {
  std::string name;
  std::shared_ptr<Model> model;
  std::unique_ptr<Batcher> batcher;
  std::atomic<int64_t> success{0}, failure{0}, request_us{0};
  // Requests by duration (kLatencyBoundsUs; the last slot: longer), for p50/p99 in a console.
  std::array<std::atomic<int64_t>, kLatencyBuckets> latency_count{};

  void Record(int64_t us) {
    request_us += us;
    const auto* end = std::end(kLatencyBoundsUs);
    ++latency_count[std::lower_bound(std::begin(kLatencyBoundsUs), end, us) -
                    std::begin(kLatencyBoundsUs)];
  }

  void Enter() {
    std::lock_guard lock(flight_mu);
    ++in_flight;
  }
  void Leave() {
    std::lock_guard lock(flight_mu);
    if (--in_flight == 0) landed.notify_all();
  }
  // Waits for the requests in flight (no new one can enter: it is out of the routing table),
  // then stops the batcher.
  void Drain() {
    std::unique_lock lock(flight_mu);
    landed.wait(lock, [&] { return in_flight == 0; });
    lock.unlock();
    batcher->Shutdown();
  }

 private:
  std::mutex flight_mu;
  std::condition_variable landed;
  int in_flight = 0;  // guarded by flight_mu
};

// A request's hold on the version it reaches: entered while the routing table was locked, left
// when the request is answered.
class Lease {
 public:
  explicit Lease(std::shared_ptr<Served> served) : served_(std::move(served)) { served_->Enter(); }
  Lease(Lease&& other) noexcept = default;
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      if (served_) served_->Leave();
      served_ = std::move(other.served_);
    }
    return *this;
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    if (served_) served_->Leave();
  }
  Served* operator->() const { return served_.get(); }
  Served& operator*() const { return *served_; }

 private:
  std::shared_ptr<Served> served_;
};

Response ErrorResponse(const Status& status) {
  if (status.code() == StatusCode::kResourceExhausted) {
    Response r = Response::Error(503, status);
    r.headers["Retry-After"] = "1";
    return r;
  }
  return Response::Error(status);
}

Response BodyResponse(Body body) {
  Response r;
  r.body = std::move(body.bytes);
  if (body.json_length) {
    r.headers[kJsonLengthHeader] = std::to_string(*body.json_length);
    r.headers["Content-Type"] = "application/octet-stream";
  } else {
    r.headers["Content-Type"] = "application/json";
  }
  return r;
}

std::string LabelValue(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

struct Service::Impl {
  ServiceOptions options;
  mutable std::mutex mu;
  struct Entry {
    std::map<std::string, std::shared_ptr<Served>> versions;
    std::string current;  // the primary version
    std::string canary;   // "" when none
    int canary_percent = 0;
    mutable uint64_t arrivals = 0;  // requests without an id, for the canary's share
  };
  std::map<std::string, Entry> models;  // guarded by mu
  std::atomic<bool> ready{true};

  // The version a request names; else the canary for its share of ids (`id` given), else the
  // primary.
  Result<Lease> Find(const std::string& name, const std::string& version,
                     const std::string* id) const {
    std::lock_guard lock(mu);
    const auto it = models.find(name);
    if (it == models.end())
      return NotFoundError("no model named '" + PrintableForMessage(name, 100) + "'");
    const Entry& entry = it->second;
    const std::string& v = !version.empty()             ? version
                           : id && ToCanary(entry, *id) ? entry.canary
                                                        : entry.current;
    const auto vit = entry.versions.find(v);
    if (vit == entry.versions.end()) {
      return NotFoundError("model '" + name + "' has no version '" + PrintableForMessage(v, 40) +
                           "'");
    }
    return Lease(vit->second);
  }

  // Deterministic by id: a hash's remainder below the percent. Without an id, by arrival.
  static bool ToCanary(const Entry& entry, const std::string& id) {
    if (entry.canary.empty() || entry.canary_percent == 0) return false;
    const std::string key = id.empty() ? std::to_string(entry.arrivals++) : id;
    return Xxh3_64(key) % 100 < static_cast<uint64_t>(entry.canary_percent);
  }

  Result<Lease> FindFor(const Request& request, const std::string* id = nullptr) const {
    const auto v = request.params.find("version");
    return Find(request.params.at("model"), v == request.params.end() ? "" : v->second, id);
  }

  Response Infer(const Request& request) {
    Result<Lease> served = FindFor(request);  // an unknown model is a 404 before any parsing
    if (!served.ok()) return ErrorResponse(served.status());
    const auto start = std::chrono::steady_clock::now();
    Result<InferRequest> parsed = Parse(request);
    if (parsed.ok() && request.params.count("version") == 0) {
      served = FindFor(request, &parsed->id);  // the canary's share
      if (!served.ok()) return ErrorResponse(served.status());
    }
    Result<Body> body = parsed.ok() ? InferOn(**served, std::move(*parsed), request.client_gone)
                                    : Result<Body>(parsed.status());
    (*served)->Record(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    if (!body.ok()) {
      ++(*served)->failure;
      return ErrorResponse(body.status());
    }
    ++(*served)->success;
    return BodyResponse(std::move(*body));
  }

  Result<InferRequest> Parse(const Request& request) const {
    if (request.body.size() > options.max_request_bytes) {
      return InvalidArgumentError("the request's " + std::to_string(request.body.size()) +
                                  " bytes are over the limit of " +
                                  std::to_string(options.max_request_bytes));
    }
    REEL_ASSIGN_OR_RETURN(std::optional<size_t> json_length,
                          JsonLengthHeader(request.Header(kJsonLengthHeader), request.body.size()));
    return ParseInferRequest(request.body, json_length, {}, request.body.capacity());
  }

  // `gone`: whether the client has left (may be empty); such a request is dropped before compute.
  Result<Body> InferOn(Served& served, InferRequest parsed,
                       const std::function<bool()>& gone) const {
    const ModelInfo& info = served.model->info();
    REEL_RETURN_IF_ERROR(CheckRequest(parsed, info));
    VideoScoring how;
    if (parsed.timeout_us) {
      how.deadline = Clock::System()->Now() + std::chrono::microseconds(*parsed.timeout_us);
    }
    how.gone = gone;
    how.clips = parsed.clips.value_or(0);
    how.timeline = WantsTimeline(parsed);
    // The input's data moves on to the batcher; the response needs only the rest.
    REEL_ASSIGN_OR_RETURN(Scores scores, Score(served, std::move(parsed.inputs[0]), how));
    return EncodeInferResponse(ResponseFor(parsed, served.name, info, scores), parsed.outputs,
                               parsed.binary_output);
  }

  Result<Scores> Score(Served& served, Tensor input, const VideoScoring& how) const {
    const ModelInfo& info = served.model->info();
    if (input.name == kUri) {
      REEL_ASSIGN_OR_RETURN(std::vector<std::string_view> uris, input.Strings());
      std::vector<std::string> files;
      for (std::string_view uri : uris) {
        REEL_ASSIGN_OR_RETURN(std::string bytes, ReadAllowed(uri, options.allowed_uri_prefixes));
        files.push_back(std::move(bytes));
      }
      return ScoreVideos(*served.batcher, info, {files.begin(), files.end()}, how);
    }
    if (input.datatype == DataType::kBytes) {
      REEL_ASSIGN_OR_RETURN(std::vector<std::string_view> videos, input.Strings());
      return ScoreVideos(*served.batcher, info, videos, how);
    }
    REEL_ASSIGN_OR_RETURN(BatchWork work, TensorWork(std::move(input), info));
    work.deadline = how.deadline;
    work.cancelled = how.gone;
    Scores scores;
    scores.batch = work.n;
    REEL_ASSIGN_OR_RETURN(BatchResult result, served.batcher->Run(std::move(work)));
    scores.logits = std::move(result.output);
    return scores;
  }

  Response Metadata(const Request& request) const {
    auto served = FindFor(request);
    if (!served.ok()) return ErrorResponse(served.status());
    const ModelInfo& info = (*served)->model->info();
    std::vector<std::string> versions;
    Json canary = nullptr;
    {
      std::lock_guard lock(mu);
      const Entry& entry = models.at((*served)->name);
      for (const auto& [v, unused] : entry.versions) versions.push_back(v);
      if (!entry.canary.empty()) {
        canary = {{"version", entry.canary}, {"percent", entry.canary_percent}};
      }
    }
    std::vector<int64_t> input_shape = {-1};
    input_shape.insert(input_shape.end(), info.sample_shape.begin(), info.sample_shape.end());
    const Json output_shape = {-1, info.num_classes()};
    return Response::Json(
        200,
        Json{{"name", (*served)->name},
             {"versions", versions},
             {"platform", info.platform},
             {"inputs",
              Json::array({Json{{"name", kInput}, {"datatype", "FP32"}, {"shape", input_shape}},
                           Json{{"name", kUri}, {"datatype", "BYTES"}, {"shape", {-1}}}})},
             {"outputs",
              Json::array(
                  {Json{{"name", kLogits}, {"datatype", "FP32"}, {"shape", output_shape}},
                   Json{{"name", kProbabilities}, {"datatype", "FP32"}, {"shape", output_shape}}})},
             {"parameters",
              {{"architecture", info.architecture},
               {"source", info.source},
               {"optimization", info.optimization},
               {"class_names", info.class_names},
               {"max_batch_size", (*served)->batcher->options().max_batch},
               {"canary", canary}}}});
  }

  Response ModelReady(const Request& request) const {
    auto served = FindFor(request);
    if (!served.ok()) return ErrorResponse(served.status());
    return ready ? Response::Text(200, "") : Response::Error(UnavailableError("shutting down"));
  }

  // Points `role` of `name` at `version` (adding `fresh` unless it is served already) and takes
  // the version the role held out of routing; returns that one for draining, null when it still
  // serves (as the other role) or there was none.
  std::shared_ptr<Served> Assign(const std::string& name, const std::string& version,
                                 std::shared_ptr<Served> fresh, Service::Role role) {
    std::lock_guard lock(mu);
    Entry& entry = models[name];
    auto [it, added] = entry.versions.try_emplace(version, fresh);
    if (!added && fresh) fresh->batcher->Shutdown();  // a racing swap added it first
    const bool primary = role == Service::Role::kPrimary;
    std::string previous = std::exchange(primary ? entry.current : entry.canary, version);
    if (primary && entry.canary == version) entry.canary.clear();  // the canary promoted
    const std::string& other = primary ? entry.canary : entry.current;
    if (previous.empty() || previous == version || previous == other) return nullptr;
    std::shared_ptr<Served> old = std::move(entry.versions[previous]);
    entry.versions.erase(previous);
    return old;
  }

  std::vector<std::shared_ptr<Served>> All() const {
    std::lock_guard lock(mu);
    std::vector<std::shared_ptr<Served>> all;
    for (const auto& [name, entry] : models) {
      for (const auto& [v, served] : entry.versions) all.push_back(served);
    }
    return all;
  }
};

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

Service::~Service() { Shutdown(); }

namespace {

Result<std::shared_ptr<Served>> StartServed(const std::string& name, std::shared_ptr<Model> model,
                                            BatcherOptions batching) {
  const ModelInfo& info = model->info();
  Model* raw = model.get();
  REEL_ASSIGN_OR_RETURN(
      std::unique_ptr<Batcher> batcher,
      Batcher::Start(std::move(batching), info.sample_size(), info.num_classes(),
                     [raw](int, const float* input, int64_t n) { return raw->Forward(input, n); }));
  auto served = std::make_shared<Served>();
  served->name = name;
  served->model = std::move(model);
  served->batcher = std::move(batcher);
  return served;
}

}  // namespace

Status Service::AddModel(std::string name, std::shared_ptr<Model> model, BatcherOptions batching) {
  if (name.empty()) name = model->info().name;
  const std::string version = model->info().version;
  REEL_ASSIGN_OR_RETURN(std::shared_ptr<Served> served,
                        StartServed(name, std::move(model), std::move(batching)));
  std::lock_guard lock(impl_->mu);
  Impl::Entry& entry = impl_->models[name];
  if (entry.versions.count(version)) {
    return AlreadyExistsError("model '" + name + "' version " + version + " is served already");
  }
  entry.versions[version] = std::move(served);
  entry.current = version;
  return Status::Ok();
}

Status Service::Swap(const std::string& name, std::shared_ptr<Model> model, BatcherOptions batching,
                     Role role) {
  const std::string version = model->info().version;
  bool served_already = false;
  {
    std::lock_guard lock(impl_->mu);
    const auto it = impl_->models.find(name);
    if (role == Role::kCanary && (it == impl_->models.end() || it->second.current.empty())) {
      return NotFoundError("model '" + name + "' has no primary version to add a canary to");
    }
    served_already = it != impl_->models.end() && it->second.versions.count(version);
  }
  // Loaded and started outside the lock: requests keep flowing to the old version meanwhile.
  std::shared_ptr<Served> fresh;
  if (!served_already) {
    REEL_ASSIGN_OR_RETURN(fresh, StartServed(name, std::move(model), std::move(batching)));
  }
  std::shared_ptr<Served> old = impl_->Assign(name, version, std::move(fresh), role);
  if (old) old->Drain();  // after the switch: its in-flight requests finish, then it unloads
  return Status::Ok();
}

Status Service::SetCanaryPercent(const std::string& name, int percent) {
  if (percent < 0 || percent > 100) {
    return InvalidArgumentError("a canary percent is 0-100, got " + std::to_string(percent));
  }
  std::lock_guard lock(impl_->mu);
  const auto it = impl_->models.find(name);
  if (it == impl_->models.end()) return NotFoundError("no model named '" + name + "'");
  it->second.canary_percent = percent;
  return Status::Ok();
}

Status Service::RemoveCanary(const std::string& name) {
  std::shared_ptr<Served> old;
  {
    std::lock_guard lock(impl_->mu);
    const auto it = impl_->models.find(name);
    if (it == impl_->models.end() || it->second.canary.empty()) {
      return NotFoundError("model '" + name + "' has no canary");
    }
    Impl::Entry& entry = it->second;
    if (entry.canary != entry.current) {
      old = entry.versions[entry.canary];
      entry.versions.erase(entry.canary);
    }
    entry.canary.clear();
  }
  if (old) old->Drain();
  return Status::Ok();
}

std::string Service::ServedVersion(const std::string& name, Role role) const {
  std::lock_guard lock(impl_->mu);
  const auto it = impl_->models.find(name);
  if (it == impl_->models.end()) return "";
  return role == Role::kPrimary ? it->second.current : it->second.canary;
}

Status Service::AddRoutes(http::Router* router) {
  Impl* s = impl_.get();
  const auto metadata = [s](const Request& r) { return s->Metadata(r); };
  const auto ready = [s](const Request& r) { return s->ModelReady(r); };
  const auto infer = [s](const Request& r) { return s->Infer(r); };
  REEL_RETURN_IF_ERROR(router->Add("GET", "/v2", [](const Request&) {
    return Response::Json(200, Json{{"name", "reel"},
                                    {"version", GetBuildInfo().version},
                                    {"extensions", {"binary_tensor_data", "classification"}}});
  }));
  REEL_RETURN_IF_ERROR(router->Add("GET", "/v2/health/live",
                                   [](const Request&) { return Response::Text(200, ""); }));
  REEL_RETURN_IF_ERROR(router->Add("GET", "/v2/health/ready", [s](const Request&) {
    return s->ready ? Response::Text(200, "") : Response::Error(UnavailableError("shutting down"));
  }));
  for (const std::string prefix : {"/v2/models/{model}", "/v2/models/{model}/versions/{version}"}) {
    REEL_RETURN_IF_ERROR(router->Add("GET", prefix, metadata));
    REEL_RETURN_IF_ERROR(router->Add("GET", prefix + "/ready", ready));
    REEL_RETURN_IF_ERROR(router->Add("POST", prefix + "/infer", infer));
  }
  return router->Add("GET", "/metrics", [this](const Request&) {
    Response r = Response::Text(200, MetricsText());
    r.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8";
    return r;
  });
}

namespace {
// Requests by duration, as Prometheus histograms count them (cumulative buckets, in µs), so
// that p50 and p99 can be read from two scrapes (Triton has no such histogram by default).
void AppendLatencyHistogram(const std::vector<std::shared_ptr<Served>>& all, std::string* out) {
  *out += "# HELP reel_inference_request_duration_us Request durations in microseconds\n";
  *out += "# TYPE reel_inference_request_duration_us histogram\n";
  for (const auto& served : all) {
    const std::string base = "model=\"" + LabelValue(served->name) + "\",version=\"" +
                             LabelValue(served->model->info().version) + "\"";
    int64_t count = 0;
    for (size_t i = 0; i < kLatencyBuckets; ++i) {
      count += served->latency_count[i].load();
      const std::string le =
          i < std::size(kLatencyBoundsUs) ? std::to_string(kLatencyBoundsUs[i]) : "+Inf";
      *out += "reel_inference_request_duration_us_bucket{" + base + ",le=\"" + le + "\"} " +
              std::to_string(count) + "\n";
    }
    *out += "reel_inference_request_duration_us_sum{" + base + "} " +
            std::to_string(served->request_us.load()) + "\n";
    *out +=
        "reel_inference_request_duration_us_count{" + base + "} " + std::to_string(count) + "\n";
  }
}
}  // namespace

std::string Service::MetricsText() const {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
  };
  const std::vector<std::shared_ptr<Served>> all = impl_->All();
  std::string out;
  const auto family =
      [&](const Family& f,
          const std::function<std::string(const Served&, const BatcherStats&)>& value) {
        out += std::string("# HELP ") + f.name + " " + f.help + "\n# TYPE " + f.name + " " +
               f.type + "\n";
        for (const auto& served : all) {
          const BatcherStats stats = served->batcher->stats();
          const std::string labels = "{model=\"" + LabelValue(served->name) + "\",version=\"" +
                                     LabelValue(served->model->info().version) + "\"}";
          out += f.name + labels + " " + value(*served, stats) + "\n";
        }
      };
  const auto us = [](Clock::Duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  family({"nv_inference_request_success", "counter", "Number of successful inference requests"},
         [](const Served& s, const BatcherStats&) { return std::to_string(s.success.load()); });
  family({"nv_inference_request_failure", "counter", "Number of failed inference requests"},
         [](const Served& s, const BatcherStats&) { return std::to_string(s.failure.load()); });
  family({"nv_inference_count", "counter", "Number of inferences (samples) performed"},
         [](const Served&, const BatcherStats& b) { return std::to_string(b.samples); });
  family({"nv_inference_exec_count", "counter", "Number of model executions (batches)"},
         [](const Served&, const BatcherStats& b) { return std::to_string(b.batches); });
  family({"nv_inference_request_duration_us", "counter",
          "Cumulative request duration in microseconds"},
         [](const Served& s, const BatcherStats&) { return std::to_string(s.request_us.load()); });
  family(
      {"nv_inference_queue_duration_us", "counter", "Cumulative time requests waited in the queue"},
      [&](const Served&, const BatcherStats& b) { return us(b.queue_time); });
  family({"nv_inference_compute_infer_duration_us", "counter", "Cumulative model execution time"},
         [&](const Served&, const BatcherStats& b) { return us(b.compute_time); });
  family({"reel_inference_request_cancelled", "counter",
          "Requests dropped before compute because the client went away"},
         [](const Served&, const BatcherStats& b) { return std::to_string(b.cancelled); });
  family({"reel_inference_request_expired", "counter",
          "Requests whose timeout passed while they waited in the queue"},
         [](const Served&, const BatcherStats& b) { return std::to_string(b.expired); });
  family({"nv_inference_pending_request_count", "gauge", "Requests waiting in the queue"},
         [](const Served&, const BatcherStats& b) { return std::to_string(b.queued); });
  // The batch-size histogram (Triton has none by that name): executions by samples per batch.
  out += "# HELP reel_inference_batch_size Samples per model execution\n";
  out += "# TYPE reel_inference_batch_size histogram\n";
  for (const auto& served : all) {
    const BatcherStats stats = served->batcher->stats();
    const std::string base = "model=\"" + LabelValue(served->name) + "\",version=\"" +
                             LabelValue(served->model->info().version) + "\"";
    int64_t count = 0, sum = 0;
    for (const auto& [size, n] : stats.batch_sizes) sum += size * n;
    for (int le : {1, 2, 4, 8, 16, 32, 64}) {
      count = 0;
      for (const auto& [size, n] : stats.batch_sizes) count += size <= le ? n : 0;
      out += "reel_inference_batch_size_bucket{" + base + ",le=\"" + std::to_string(le) + "\"} " +
             std::to_string(count) + "\n";
    }
    out += "reel_inference_batch_size_bucket{" + base + ",le=\"+Inf\"} " +
           std::to_string(stats.batches) + "\n";
    out += "reel_inference_batch_size_sum{" + base + "} " + std::to_string(sum) + "\n";
    out += "reel_inference_batch_size_count{" + base + "} " + std::to_string(stats.batches) + "\n";
  }
  AppendLatencyHistogram(all, &out);
  return out;
}

void Service::Shutdown() {
  impl_->ready = false;
  for (const auto& served : impl_->All()) served->batcher->Shutdown();
}

http::ServerOptions ServingHttpOptions(int requests) {
  http::ServerOptions options;
  options.threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  options.handler_threads = requests;
  return options;
}

}  // namespace reel::serve
