#include "console/serving.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/strings.h"
#include "http/client.h"

namespace reel::console {
namespace {

constexpr double kNoSample = std::numeric_limits<double>::quiet_NaN();

// Reads `name{a="x",b="y"} value` (labels optional) from `line`.
Result<MetricSample> ParseSampleLine(std::string_view line) {
  MetricSample s;
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  s.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
      std::string key(line.substr(i, eq - i)), value;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size()) {
          ++j;
          value += line[j] == 'n' ? '\n' : line[j];
        } else {
          value += line[j];
        }
      }
      s.labels[key] = std::move(value);
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size() || line[i] != '}') return InvalidArgumentError("malformed labels");
    ++i;
  }
  const std::string rest(line.substr(i));
  char* end = nullptr;
  s.value = std::strtod(rest.c_str(), &end);
  if (s.name.empty() || end == rest.c_str()) return InvalidArgumentError("no value");
  return s;
}

// The sample of `name` with `labels` (a subset) in `samples`; NaN when absent.
double Value(const std::vector<MetricSample>& samples, std::string_view name,
             const std::map<std::string, std::string>& labels) {
  for (const MetricSample& s : samples) {
    if (s.name != name) continue;
    const bool match = std::all_of(labels.begin(), labels.end(), [&](const auto& kv) {
      auto it = s.labels.find(kv.first);
      return it != s.labels.end() && it->second == kv.second;
    });
    if (match) return s.value;
  }
  return kNoSample;
}

double Delta(const std::vector<MetricSample>& before, const std::vector<MetricSample>& now,
             std::string_view name, const std::map<std::string, std::string>& labels) {
  const double b = Value(before, name, labels), n = Value(now, name, labels);
  if (std::isnan(n)) return 0;
  if (std::isnan(b) || n < b) return n;  // first scrape, or the server restarted
  return n - b;
}

// The latency histogram's bucket increments between two scrapes.
std::vector<std::pair<double, double>> LatencyBuckets(const std::vector<MetricSample>& before,
                                                      const std::vector<MetricSample>& now,
                                                      const std::map<std::string, std::string>& l) {
  std::vector<std::pair<double, double>> out;
  for (const MetricSample& s : now) {
    if (s.name != "reel_inference_request_duration_us_bucket") continue;
    if (s.labels.count("model") == 0 || s.labels.at("model") != l.at("model") ||
        s.labels.at("version") != l.at("version")) {
      continue;
    }
    const std::string& le = s.labels.at("le");
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le);
    out.emplace_back(bound, Delta(before, now, s.name, s.labels));
  }
  std::sort(out.begin(), out.end());
  return out;
}

double Ms(double us) { return std::isnan(us) ? 0 : us / 1000.0; }

}  // namespace

Result<std::vector<MetricSample>> ParsePrometheusText(std::string_view text) {
  std::vector<MetricSample> out;
  int line_no = 0;
  for (const std::string& raw : SplitString(text, '\n')) {
    ++line_no;
    std::string_view line = raw;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty() || line[0] == '#') continue;
    Result<MetricSample> sample = ParseSampleLine(line);
    if (!sample.ok()) {
      return InvalidArgumentError("metrics line " + std::to_string(line_no) + " '" +
                                  std::string(line.substr(0, 80)) +
                                  "': " + sample.status().message());
    }
    out.push_back(std::move(*sample));
  }
  return out;
}

double HistogramQuantile(double q, const std::vector<std::pair<double, double>>& buckets) {
  if (buckets.empty() || buckets.back().second <= 0) return kNoSample;
  const double rank = q * buckets.back().second;
  double lower = 0, below = 0;
  for (const auto& [bound, count] : buckets) {
    if (count >= rank) {
      // The +Inf bucket has no width: answer its lower edge, as Prometheus does.
      if (std::isinf(bound)) return lower;
      const double in_bucket = count - below;
      return in_bucket <= 0 ? bound : lower + (bound - lower) * (rank - below) / in_bucket;
    }
    lower = bound;
    below = count;
  }
  return lower;
}

std::vector<ModelRates> RatesBetween(const std::vector<MetricSample>& before,
                                     const std::vector<MetricSample>& now, double seconds) {
  std::vector<ModelRates> out;
  for (const MetricSample& s : now) {
    if (s.name != "nv_inference_request_success") continue;
    const std::map<std::string, std::string> l = {
        {"model", s.labels.count("model") ? s.labels.at("model") : ""},
        {"version", s.labels.count("version") ? s.labels.at("version") : ""}};
    ModelRates r;
    r.name = l.at("model");
    r.version = l.at("version");
    r.success = s.value;
    r.failure = std::max(0.0, Value(now, "nv_inference_request_failure", l));
    const double requests = Delta(before, now, "nv_inference_request_success", l) +
                            Delta(before, now, "nv_inference_request_failure", l);
    r.requests_per_s = seconds > 0 ? requests / seconds : 0;
    if (requests > 0) {
      r.mean_latency_ms = Ms(Delta(before, now, "nv_inference_request_duration_us", l) / requests);
    }
    const auto buckets = LatencyBuckets(before, now, l);
    r.p50_ms = Ms(HistogramQuantile(0.5, buckets));
    r.p99_ms = Ms(HistogramQuantile(0.99, buckets));
    const double batches = Delta(before, now, "reel_inference_batch_size_count", l);
    if (batches > 0)
      r.mean_batch = Delta(before, now, "reel_inference_batch_size_sum", l) / batches;
    r.queue = std::max(0.0, Value(now, "nv_inference_pending_request_count", l));
    out.push_back(std::move(r));
  }
  return out;
}

ServingWatcher::ServingWatcher(std::vector<std::string> urls, int64_t period_ms, size_t history)
    : urls_(std::move(urls)),
      period_ms_(std::max<int64_t>(period_ms, 50)),
      history_(std::max<size_t>(history, 2)),
      clients_(urls_.size()),
      state_(urls_.size()) {
  if (!urls_.empty()) thread_ = std::thread([this] { Loop(); });
}

ServingWatcher::~ServingWatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ServingWatcher::Loop() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const double t =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (size_t i = 0; i < urls_.size(); ++i) ScrapeOnce(i, t);
    lock.lock();
    wake_.wait_until(lock,
                     start + std::chrono::milliseconds(period_ms_) *
                                 (1 + (std::chrono::steady_clock::now() - start) /
                                          std::chrono::milliseconds(period_ms_)),
                     [&] { return stop_; });
  }
}

void ServingWatcher::ScrapeOnce(size_t i, double t) {
  Result<std::vector<MetricSample>> samples = [&]() -> Result<std::vector<MetricSample>> {
    if (!clients_[i]) {  // one kept-alive connection per server, across scrapes
      http::ClientOptions options;
      options.timeout = std::chrono::milliseconds(std::max<int64_t>(period_ms_, 2000));
      REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(urls_[i], options));
      clients_[i].emplace(std::move(client));
    }
    REEL_ASSIGN_OR_RETURN(http::Response answer, clients_[i]->Get("/metrics"));
    if (answer.status != 200) return http::StatusFromResponse(answer, "GET /metrics");
    return ParsePrometheusText(answer.body);
  }();
  std::lock_guard lock(mu_);
  Server& s = state_[i];
  s.up = samples.ok();
  s.error = samples.ok() ? "" : samples.status().message();
  Point p;
  p.t = t;
  if (samples.ok()) {
    s.models = RatesBetween(s.last, *samples, s.last_t > 0 ? t - s.last_t : 0);
    const double front = Value(*samples, "reel_front_replicas", {});
    s.replicas = std::isnan(front) ? 1 : front;
    for (const ModelRates& m : s.models) {
      p.requests_per_s += m.requests_per_s;
      p.p50_ms = std::max(p.p50_ms, m.p50_ms);
      p.p99_ms = std::max(p.p99_ms, m.p99_ms);
      p.queue += m.queue;
    }
    p.replicas = s.replicas;
    s.last = std::move(*samples);
    s.last_t = t;
  } else {
    s.replicas = 0;
  }
  s.series.push_back(p);
  while (s.series.size() > history_) s.series.pop_front();
}

nlohmann::json ServingWatcher::Json() const {
  std::lock_guard lock(mu_);
  nlohmann::json servers = nlohmann::json::array();
  for (size_t i = 0; i < urls_.size(); ++i) {
    const Server& s = state_[i];
    nlohmann::json models = nlohmann::json::array();
    for (const ModelRates& m : s.models) {
      models.push_back({{"name", m.name},
                        {"version", m.version},
                        {"success", m.success},
                        {"failure", m.failure},
                        {"requests_per_s", m.requests_per_s},
                        {"mean_latency_ms", m.mean_latency_ms},
                        {"p50_ms", m.p50_ms},
                        {"p99_ms", m.p99_ms},
                        {"mean_batch", m.mean_batch},
                        {"queue", m.queue}});
    }
    nlohmann::json series = {
        {"t", nlohmann::json::array()},        {"requests_per_s", nlohmann::json::array()},
        {"p50_ms", nlohmann::json::array()},   {"p99_ms", nlohmann::json::array()},
        {"replicas", nlohmann::json::array()}, {"queue", nlohmann::json::array()}};
    for (const Point& p : s.series) {
      series["t"].push_back(p.t);
      series["requests_per_s"].push_back(p.requests_per_s);
      series["p50_ms"].push_back(p.p50_ms);
      series["p99_ms"].push_back(p.p99_ms);
      series["replicas"].push_back(p.replicas);
      series["queue"].push_back(p.queue);
    }
    servers.push_back({{"url", urls_[i]},
                       {"up", s.up},
                       {"error", s.error},
                       {"replicas", s.replicas},
                       {"models", std::move(models)},
                       {"series", std::move(series)},
                       {"scrapes", s.series.size()}});
  }
  return {{"servers", std::move(servers)}};
}

}  // namespace reel::console
