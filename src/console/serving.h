// Serving as the console shows it: each `reel serve` process's Prometheus /metrics, scraped on a
// timer, turned into rates and latency quantiles between two scrapes (as Prometheus's rate() and
// histogram_quantile() would), and kept as a short history for the charts.
//
// Thread-safety: ServingWatcher's members may be called from any thread; the scraper runs on a
// thread of its own, stopped by the destructor.
#pragma once

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/client.h"

namespace reel::console {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The text exposition format (version 0.0.4): comments and blank lines skipped, label values
// unescaped. Errors: InvalidArgument naming the line that does not parse.
Result<std::vector<MetricSample>> ParsePrometheusText(std::string_view text);

// The q-quantile of the observations a cumulative histogram's buckets ({upper bound, count},
// ascending, the last +Inf) counted, interpolated linearly inside its bucket; NaN when empty.
double HistogramQuantile(double q, const std::vector<std::pair<double, double>>& buckets);

// One model version's figures between two scrapes.
struct ModelRates {
  std::string name, version;
  double success = 0, failure = 0;  // totals
  double requests_per_s = 0, mean_latency_ms = 0, p50_ms = 0, p99_ms = 0, mean_batch = 0;
  double queue = 0;  // requests waiting now
};

// The figures of scrape `now` given the previous one (`before`, empty for the first) and the
// seconds between them.
std::vector<ModelRates> RatesBetween(const std::vector<MetricSample>& before,
                                     const std::vector<MetricSample>& now, double seconds);

class ServingWatcher {
 public:
  // Starts scraping `urls` every `period_ms`, keeping `history` points per server.
  ServingWatcher(std::vector<std::string> urls, int64_t period_ms, size_t history);
  ~ServingWatcher();
  ServingWatcher(const ServingWatcher&) = delete;
  ServingWatcher& operator=(const ServingWatcher&) = delete;

  // API.md's /ui/api/serving answer.
  nlohmann::json Json() const;
  size_t servers() const { return urls_.size(); }

 private:
  struct Point {
    double t = 0, requests_per_s = 0, p50_ms = 0, p99_ms = 0, replicas = 0, queue = 0;
  };
  struct Server {
    bool up = false;
    std::string error;
    double replicas = 0;
    std::vector<MetricSample> last;
    double last_t = 0;
    std::vector<ModelRates> models;
    std::deque<Point> series;
  };
  void Loop();
  void ScrapeOnce(size_t i, double t);

  const std::vector<std::string> urls_;
  const int64_t period_ms_;
  const size_t history_;
  std::vector<std::optional<http::Client>> clients_;  // the scraper thread's own
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<Server> state_;
  std::thread thread_;
};

}  // namespace reel::console
