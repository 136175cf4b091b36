// Quantities as people write them in configs, the way Kubernetes and Argo read them:
//   cpu       "2", "0.5", "500m"              -> millicores
//   memory    "4Gi", "512Mi", "1G", "1048576" -> bytes
//   duration  "30m", "1h30m", "10s", "250ms"  -> milliseconds
//   cpu list  "0-3,6" (Linux's cpuset format)  -> core numbers, ascending
// Errors: InvalidArgument naming the text and saying what is accepted (callers prepend where the
// value came from). Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel {

// Millicores, >= 0 ("0" is allowed: a caller that needs a positive amount checks).
Result<int64_t> ParseCpuMillicores(std::string_view cpu);
// Bytes, >= 0. A trailing 'm' (thousandths of a byte in Kubernetes) is refused as a likely typo.
Result<int64_t> ParseMemoryBytes(std::string_view memory);
// A sequence of <number><unit> with units d, h, m, s, ms ("1h30m"); a bare number is seconds.
Result<std::chrono::milliseconds> ParseDuration(std::string_view duration);

// Distinct core numbers, ascending; "" is the empty list.
Result<std::vector<int>> ParseCpuList(std::string_view list);

// "2", "0.5", "250m": the shortest of cores or millicores that reads back the same.
std::string FormatCpu(int64_t millicores);
// "8Gi", "512Mi", "1.5Gi", "1000": binary units where the value is a whole or half one.
std::string FormatMemory(int64_t bytes);
// "1h30m", "45s", "250ms".
std::string FormatDuration(std::chrono::milliseconds duration);
// "0-3,6" for {0, 1, 2, 3, 6}.
std::string FormatCpuList(const std::vector<int>& cores);

}  // namespace reel
