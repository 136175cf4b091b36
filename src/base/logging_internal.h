// Internals of logging.cc exposed for tests; not part of base's public contract.
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/sinks/sink.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/logging.h"

namespace reel::internal {

// The formatter used for LogFormat::kJson: one JSON object per line,
//   {"ts":"2026-11-29T16:20:01.123Z","level":"info","logger":"storage","msg":"..."}
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

using ::reel::FormatIso8601Utc;  // base/clock.h

// InitLogging, but writing to `target` instead of stderr. kAuto means human format (there is no
// terminal to ask about). Lets tests capture what Logger(...) writes.
Status InitLoggingWithSink(std::string_view level, LogFormat format,
                           std::shared_ptr<spdlog::sinks::sink> target);

}  // namespace reel::internal
