#include "base/logging.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/ostream_sink.h>

#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/logging_internal.h"
#include "testing/status_matchers.h"

namespace reel {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

std::string FormatJson(const spdlog::details::log_msg& msg) {
  auto formatter = internal::MakeJsonLogFormatter();
  spdlog::memory_buf_t buf;
  formatter->format(msg, buf);
  return std::string(buf.data(), buf.size());
}

// 2026-11-29T16:20:01.123Z
const system_clock::time_point kTime = system_clock::time_point(milliseconds(1795969201123LL));

TEST(LoggingTest, Iso8601UtcWithMilliseconds) {
  EXPECT_EQ(internal::FormatIso8601Utc(kTime), "2026-11-29T16:20:01.123Z");
  EXPECT_EQ(internal::FormatIso8601Utc(system_clock::time_point()), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(internal::FormatIso8601Utc(system_clock::time_point(milliseconds(5))),
            "1970-01-01T00:00:00.005Z");
}

TEST(LoggingTest, JsonFormatterWritesOneObjectPerLine) {
  spdlog::details::log_msg msg(kTime, spdlog::source_loc{}, "storage", spdlog::level::info,
                               "put a/b (12 bytes)");
  EXPECT_EQ(FormatJson(msg),
            "{\"ts\":\"2026-11-29T16:20:01.123Z\",\"level\":\"info\",\"logger\":\"storage\","
            "\"msg\":\"put a/b (12 bytes)\"}\n");
}

TEST(LoggingTest, JsonFormatterEscapes) {
  const std::string payload = "say \"hi\"\\ \n\ttab \x01 caf\xc3\xa9";
  spdlog::details::log_msg msg(kTime, spdlog::source_loc{}, "we\"ird", spdlog::level::warn,
                               payload);
  const std::string line = FormatJson(msg);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "the message's newline must be escaped";
  EXPECT_NE(line.find(R"("msg":"say \"hi\"\\ \n\ttab \u0001 café")"), std::string::npos) << line;
  const auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed.at("msg"), payload);
  EXPECT_EQ(parsed.at("logger"), "we\"ird");
  EXPECT_EQ(parsed.at("level"), "warn");
  EXPECT_EQ(parsed.size(), 4u);
}

TEST(LoggingTest, JsonFormatterSurvivesInvalidUtf8) {
  spdlog::details::log_msg msg(kTime, spdlog::source_loc{}, "x", spdlog::level::err,
                               "bad \xff byte");
  const std::string line = FormatJson(msg);
  const auto parsed = nlohmann::json::parse(line);  // still valid JSON
  EXPECT_EQ(parsed.at("level"), "error");
  EXPECT_EQ(parsed.at("msg"), "bad \xef\xbf\xbd byte");  // U+FFFD
}

TEST(LoggingTest, LevelNames) {
  const std::pair<spdlog::level::level_enum, const char*> cases[] = {
      {spdlog::level::trace, "trace"}, {spdlog::level::debug, "debug"},
      {spdlog::level::info, "info"},   {spdlog::level::warn, "warn"},
      {spdlog::level::err, "error"},   {spdlog::level::critical, "critical"}};
  for (const auto& [level, name] : cases) {
    spdlog::details::log_msg msg(kTime, spdlog::source_loc{}, "x", level, "m");
    EXPECT_EQ(nlohmann::json::parse(FormatJson(msg)).at("level"), name);
  }
}

TEST(LoggingTest, UnknownLevelIsInvalidArgument) {
  Status s = InitLogging("verbose");
  EXPECT_STATUS(s, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'verbose'"), std::string::npos);
}

TEST(LoggingTest, SameNameSameLogger) {
  auto a = Logger("same");
  auto b = Logger("same");
  EXPECT_EQ(a, b);
  EXPECT_NE(Logger("other"), a);
  EXPECT_EQ(a->name(), "same");
  EXPECT_EQ(spdlog::get("same"), a);  // registered with spdlog
}

TEST(LoggingTest, ConcurrentCreationYieldsOneLoggerPerName) {
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<spdlog::logger>> got(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&got, t] { got[t] = Logger("concurrent"); });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& logger : got) EXPECT_EQ(logger, got[0]);
}

class CapturedLogging : public ::testing::Test {
 protected:
  void SetUp() override { sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_); }
  void TearDown() override {
    // Back to stderr so later tests do not write into a destroyed stream.
    ASSERT_OK(InitLogging("info"));
  }
  std::vector<nlohmann::json> Lines() {
    std::vector<nlohmann::json> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }

  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST_F(CapturedLogging, LoggersWriteJsonThroughTheSharedSink) {
  auto early = Logger("early");  // exists before the reconfiguration below
  ASSERT_OK(internal::InitLoggingWithSink("debug", LogFormat::kJson, sink_));
  early->debug("hello {}", 42);
  Logger("late")->info("quote \" here");
  early->trace("filtered out");

  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_EQ(lines[0].at("logger"), "early");
  EXPECT_EQ(lines[0].at("level"), "debug");
  EXPECT_EQ(lines[0].at("msg"), "hello 42");
  EXPECT_EQ(lines[1].at("logger"), "late");
  EXPECT_EQ(lines[1].at("msg"), "quote \" here");
  const std::string ts = lines[0].at("ts");
  EXPECT_EQ(ts.size(), 24u) << ts;
  EXPECT_EQ(ts.back(), 'Z');
}

TEST_F(CapturedLogging, InitLoggingReconfiguresLevelsOfExistingLoggers) {
  auto logger = Logger("levels");
  ASSERT_OK(internal::InitLoggingWithSink("error", LogFormat::kJson, sink_));
  EXPECT_EQ(logger->level(), spdlog::level::err);
  logger->warn("dropped");
  logger->error("kept");
  ASSERT_OK(internal::InitLoggingWithSink("WARN", LogFormat::kJson, sink_));
  EXPECT_EQ(logger->level(), spdlog::level::warn);
  logger->warn("now kept");
  ASSERT_OK(internal::InitLoggingWithSink("off", LogFormat::kJson, sink_));
  logger->critical("silenced");

  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_EQ(lines[0].at("msg"), "kept");
  EXPECT_EQ(lines[1].at("msg"), "now kept");
}

TEST_F(CapturedLogging, HumanFormat) {
  ASSERT_OK(internal::InitLoggingWithSink("info", LogFormat::kHuman, sink_));
  Logger("human")->info("plain text");
  const std::string out = out_.str();
  EXPECT_NE(out.find("[human] plain text\n"), std::string::npos) << out;
  EXPECT_NE(out.find(" info "), std::string::npos) << out;
  EXPECT_EQ(out.find('{'), std::string::npos) << out;
}

TEST_F(CapturedLogging, ManyThreadsLogWholeLines) {
  ASSERT_OK(internal::InitLoggingWithSink("info", LogFormat::kJson, sink_));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      auto logger = Logger("thread" + std::to_string(t));
      for (int i = 0; i < 100; ++i) logger->info("message {} from {}", i, t);
    });
  }
  for (auto& thread : threads) thread.join();
  const auto lines = Lines();  // parse fails if lines interleaved
  EXPECT_EQ(lines.size(), 400u);
}

}  // namespace
}  // namespace reel
