#include "base/logging.h"

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/logging_internal.h"

namespace reel {
namespace {

constexpr char kHumanPattern[] = "%Y-%m-%d %H:%M:%S.%e %^%-8l%$ [%n] %v";

// The names InitLogging accepts; spdlog's own spellings ("warning") are accepted too because
// they are what its messages print.
std::optional<spdlog::level::level_enum> ParseLevel(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "trace") return spdlog::level::trace;
  if (lower == "debug") return spdlog::level::debug;
  if (lower == "info") return spdlog::level::info;
  if (lower == "warn" || lower == "warning") return spdlog::level::warn;
  if (lower == "error" || lower == "err") return spdlog::level::err;
  if (lower == "critical") return spdlog::level::critical;
  if (lower == "off") return spdlog::level::off;
  return std::nullopt;
}

// JSON uses the same level names as InitLogging so that a collector's filter and the command
// line agree ("warn", not spdlog's "warning").
std::string_view JsonLevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

void Append(std::string_view text, spdlog::memory_buf_t& dest) {
  dest.append(text.data(), text.data() + text.size());
}

// nlohmann::json does the escaping (quotes, backslashes, control characters). Invalid UTF-8 in a
// message is replaced rather than thrown about: a log line must never take the process down.
void AppendJsonString(std::string_view text, spdlog::memory_buf_t& dest) {
  const nlohmann::json value = std::string(text);
  Append(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), dest);
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    Append("{\"ts\":\"", dest);
    Append(internal::FormatIso8601Utc(msg.time), dest);
    Append("\",\"level\":\"", dest);
    Append(JsonLevelName(msg.level), dest);
    Append("\",\"logger\":", dest);
    AppendJsonString(std::string_view(msg.logger_name.data(), msg.logger_name.size()), dest);
    Append(",\"msg\":", dest);
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    Append("}\n", dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

struct LogState {
  std::mutex mu;
  // Every logger writes into this one sink. InitLogging changes what it forwards to, so loggers
  // handed out earlier follow a new configuration without being touched while in use.
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sink =
      std::make_shared<spdlog::sinks::dist_sink_mt>();
  spdlog::level::level_enum level = spdlog::level::info;
  bool configured = false;
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers;
};

// Never destroyed: other static objects' destructors may still log.
LogState& State() {
  static LogState* state = new LogState;
  return *state;
}

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

std::shared_ptr<spdlog::sinks::sink> MakeStderrSink(LogFormat format) {
  if (format == LogFormat::kJson) return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  // Colours only when stderr is a terminal (spdlog's automatic colour mode checks).
  return std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
}

void ConfigureLocked(LogState& state, spdlog::level::level_enum level, LogFormat format,
                     std::shared_ptr<spdlog::sinks::sink> target) {
  if (format == LogFormat::kJson) {
    target->set_formatter(internal::MakeJsonLogFormatter());
  } else {
    target->set_formatter(std::make_unique<spdlog::pattern_formatter>(kHumanPattern));
  }
  state.sink->set_sinks({std::move(target)});
  state.level = level;
  for (auto& [name, logger] : state.loggers) logger->set_level(level);
  state.configured = true;
}

void EnsureConfiguredLocked(LogState& state) {
  if (state.configured) return;
  const LogFormat format = StderrIsTerminal() ? LogFormat::kHuman : LogFormat::kJson;
  ConfigureLocked(state, spdlog::level::info, format, MakeStderrSink(format));
}

}  // namespace

namespace internal {

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() {
  return std::make_unique<JsonFormatter>();
}

Status InitLoggingWithSink(std::string_view level, LogFormat format,
                           std::shared_ptr<spdlog::sinks::sink> target) {
  const auto parsed = ParseLevel(level);
  if (!parsed) {
    return InvalidArgumentError("unknown log level '" + std::string(level) +
                                "' (expected one of: trace, debug, info, warn, error, off)");
  }
  LogState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  ConfigureLocked(state, *parsed, format == LogFormat::kJson ? format : LogFormat::kHuman,
                  std::move(target));
  return Status::Ok();
}

}  // namespace internal

Status InitLogging(std::string_view level, LogFormat format) {
  if (format == LogFormat::kAuto) {
    format = StderrIsTerminal() ? LogFormat::kHuman : LogFormat::kJson;
  }
  return internal::InitLoggingWithSink(level, format, MakeStderrSink(format));
}

std::shared_ptr<spdlog::logger> Logger(std::string_view name) {
  LogState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  EnsureConfiguredLocked(state);
  if (auto it = state.loggers.find(name); it != state.loggers.end()) return it->second;

  auto logger = std::make_shared<spdlog::logger>(std::string(name), state.sink);
  logger->set_level(state.level);
  try {
    // Registered so that spdlog::get(name) finds it too. Not spdlog::initialize_logger: that
    // would overwrite the sink's formatter with spdlog's global pattern.
    spdlog::register_logger(logger);
  } catch (const spdlog::spdlog_ex&) {
    // Someone registered this name with spdlog directly; ours still works, it is just not the
    // one spdlog::get returns.
  }
  state.loggers.emplace(std::string(name), logger);
  return logger;
}

}  // namespace reel
