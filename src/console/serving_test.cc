#include "console/serving.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>

#include "http/server.h"
#include "testing/status_matchers.h"
#include "testing/wait.h"

namespace reel::console {
namespace {

TEST(PrometheusTextTest, ParsesNamesLabelsAndValuesSkippingComments) {
  ASSERT_OK_AND_ASSIGN(auto samples,
                       ParsePrometheusText("# HELP x y\n# TYPE x counter\n"
                                           "x{model=\"a \\\"q\\\"\",version=\"1\"} 12\n"
                                           "up 1\r\n\n"
                                           "h_bucket{le=\"+Inf\"} 3.5e2\n"));
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].name, "x");
  EXPECT_EQ(samples[0].labels.at("model"), "a \"q\"");
  EXPECT_EQ(samples[0].value, 12);
  EXPECT_EQ(samples[1].name, "up");
  EXPECT_EQ(samples[2].value, 350);
  EXPECT_STATUS(ParsePrometheusText("ok 1\nbroken{a=\"1\" 2\n").status(),
                StatusCode::kInvalidArgument);
  EXPECT_THAT(ParsePrometheusText("ok 1\nbroken{a=\"1\" 2\n").status().message(),
              ::testing::HasSubstr("line 2"));
  EXPECT_STATUS(ParsePrometheusText("novalue\n").status(), StatusCode::kInvalidArgument);
}

TEST(HistogramQuantileTest, InterpolatesInsideTheBucket) {
  const double inf = std::numeric_limits<double>::infinity();
  // 100 observations: 50 at or below 10, 90 at or below 20, all at or below 40.
  const std::vector<std::pair<double, double>> b = {{10, 50}, {20, 90}, {40, 100}, {inf, 100}};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, b), 10);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.7, b), 15);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, b), 38);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.25, b), 5);
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{10, 0}, {inf, 0}})));
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, {{10, 1}, {inf, 10}}), 10);  // beyond the last bound
}

std::string Scrape(int success, int in_1ms, int in_10ms, int batches, int samples) {
  const std::string l = "{model=\"m\",version=\"2\"";
  return "nv_inference_request_success" + l + "} " + std::to_string(success) + "\n" +
         "nv_inference_request_failure" + l + "} 1\n" + "nv_inference_request_duration_us" + l +
         "} " + std::to_string(success * 4000) + "\n" + "nv_inference_pending_request_count" + l +
         "} 3\n" + "reel_inference_request_duration_us_bucket" + l + ",le=\"1000\"} " +
         std::to_string(in_1ms) + "\n" + "reel_inference_request_duration_us_bucket" + l +
         ",le=\"10000\"} " + std::to_string(in_10ms) + "\n" +
         "reel_inference_request_duration_us_bucket" + l + ",le=\"+Inf\"} " +
         std::to_string(success) + "\n" + "reel_inference_batch_size_sum" + l + "} " +
         std::to_string(samples) + "\n" + "reel_inference_batch_size_count" + l + "} " +
         std::to_string(batches) + "\n";
}

TEST(RatesBetweenTest, RatesAndQuantilesComeFromTheIncrementsBetweenScrapes) {
  ASSERT_OK_AND_ASSIGN(auto before, ParsePrometheusText(Scrape(100, 100, 100, 50, 100)));
  // 100 more requests in 2 s, all between 1 and 10 ms; 25 batches of 4.
  ASSERT_OK_AND_ASSIGN(auto now, ParsePrometheusText(Scrape(200, 100, 200, 75, 200)));
  const std::vector<ModelRates> rates = RatesBetween(before, now, 2.0);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].name, "m");
  EXPECT_EQ(rates[0].version, "2");
  EXPECT_DOUBLE_EQ(rates[0].requests_per_s, 50);
  EXPECT_DOUBLE_EQ(rates[0].p50_ms, 5.5);  // halfway through the 1-10 ms bucket
  EXPECT_DOUBLE_EQ(rates[0].p99_ms, 9.91);
  EXPECT_DOUBLE_EQ(rates[0].mean_latency_ms, 4);
  EXPECT_DOUBLE_EQ(rates[0].mean_batch, 4);
  EXPECT_DOUBLE_EQ(rates[0].queue, 3);
  EXPECT_DOUBLE_EQ(rates[0].failure, 1);
}

TEST(ServingWatcherTest, ScrapesARealServerAndMarksAMissingOneDown) {
  http::Router router;
  std::atomic<int> scrapes{0};
  std::mutex mu;
  ASSERT_OK(router.Add("GET", "/metrics", [&](const http::Request&) {
    std::lock_guard lock(mu);
    ++scrapes;
    return http::Response::Text(
        200, Scrape(10 * scrapes, 10 * scrapes, 10 * scrapes, scrapes, 2 * scrapes));
  }));
  ASSERT_OK_AND_ASSIGN(auto server, http::Server::Start({}, std::move(router)));
  // A port nobody listens on: bind one, note it, close it.
  int closed_port = 0;
  {
    http::Router none;
    ASSERT_OK_AND_ASSIGN(auto gone, http::Server::Start({}, std::move(none)));
    closed_port = gone->port();
  }
  ServingWatcher watcher({server->url(), "http://127.0.0.1:" + std::to_string(closed_port)}, 50, 4);
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return watcher.Json()["servers"][0]["scrapes"].get<size_t>() >= 4 && scrapes >= 6; },
      std::chrono::seconds(30)));
  const nlohmann::json j = watcher.Json();
  EXPECT_TRUE(j["servers"][0]["up"].get<bool>());
  EXPECT_EQ(j["servers"][0]["models"][0]["name"], "m");
  EXPECT_GT(j["servers"][0]["models"][0]["requests_per_s"].get<double>(), 0);
  EXPECT_EQ(j["servers"][0]["series"]["t"].size(), 4u);  // the history is bounded
  EXPECT_FALSE(j["servers"][1]["up"].get<bool>());
  EXPECT_THAT(j["servers"][1]["error"].get<std::string>(), ::testing::HasSubstr("127.0.0.1"));
}

}  // namespace
}  // namespace reel::console
