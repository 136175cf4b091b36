// Process-wide logging on top of spdlog. Lines go to stderr: human-readable with colours when
// stderr is a terminal, one JSON object per line otherwise (for log collectors), e.g.
//   {"ts":"2026-11-29T16:20:01.123Z","level":"info","logger":"storage","msg":"..."}
// Thread-safety: all functions may be called from any thread after InitLogging (or without it:
// the first use initialises with defaults).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "base/status.h"

namespace reel {

enum class LogFormat { kAuto, kHuman, kJson };

// Sets the level ("trace", "debug", "info", "warn", "error", "off") and format. An unknown level
// is InvalidArgument. Safe to call more than once (later calls reconfigure).
Status InitLogging(std::string_view level = "info", LogFormat format = LogFormat::kAuto);

// The logger a part should use: Logger("storage")->info("put {} ({} bytes)", key, n);
// Loggers share the sinks, level and format set by InitLogging.
std::shared_ptr<spdlog::logger> Logger(std::string_view name);

}  // namespace reel
