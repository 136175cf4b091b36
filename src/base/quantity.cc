#include "base/quantity.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/strings.h"

namespace reel {
namespace {

bool AllDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A non-negative decimal ("2", "0.5", ".5", "1."): its value in thousandths, or -1 when `number`
// is not one or is too large. Digits past the third decimal are dropped.
int64_t Thousandths(std::string_view number) {
  const size_t point = number.find('.');
  const std::string_view whole = number.substr(0, point);
  const std::string_view fraction =
      point == std::string_view::npos ? std::string_view() : number.substr(point + 1);
  if ((whole.empty() && fraction.empty()) || whole.size() > 12) return -1;
  if (!AllDigits(whole) || !AllDigits(fraction)) return -1;
  int64_t value = 0;
  for (char c : whole) value = value * 10 + (c - '0');
  value *= 1000;
  int64_t scale = 100;
  for (char c : fraction) {
    value += (c - '0') * scale;
    scale /= 10;
  }
  return value;
}

std::string Quoted(std::string_view s) { return "'" + PrintableForMessage(s) + "'"; }

struct Unit {
  std::string_view suffix;
  int64_t factor;
};

}  // namespace

Result<int64_t> ParseCpuMillicores(std::string_view cpu) {
  int64_t milli = -1;
  if (!cpu.empty() && cpu.back() == 'm') {
    const int64_t t = Thousandths(cpu.substr(0, cpu.size() - 1));
    if (t >= 0 && t % 1000 == 0) milli = t / 1000;
  } else {
    milli = Thousandths(cpu);
  }
  if (milli < 0) {
    return InvalidArgumentError("cpu " + Quoted(cpu) +
                                " is not a CPU quantity (cores: \"2\", \"0.5\"; millicores: "
                                "\"500m\")");
  }
  return milli;
}

Result<int64_t> ParseMemoryBytes(std::string_view memory) {
  static constexpr Unit kUnits[] = {{"Ki", int64_t{1} << 10},
                                    {"Mi", int64_t{1} << 20},
                                    {"Gi", int64_t{1} << 30},
                                    {"Ti", int64_t{1} << 40},
                                    {"Pi", int64_t{1} << 50},
                                    {"Ei", int64_t{1} << 60},
                                    {"k", 1000},
                                    {"M", 1000000},
                                    {"G", 1000000000},
                                    {"T", 1000000000000},
                                    {"P", 1000000000000000},
                                    {"E", 1000000000000000000}};
  std::string_view number = memory;
  int64_t factor = 1;
  for (const Unit& unit : kUnits) {
    if (number.size() > unit.suffix.size() &&
        number.substr(number.size() - unit.suffix.size()) == unit.suffix) {
      number.remove_suffix(unit.suffix.size());
      factor = unit.factor;
      break;
    }
  }
  if (!memory.empty() && memory.back() == 'm' &&
      Thousandths(number.substr(0, number.size() - 1)) >= 0) {
    return InvalidArgumentError("memory " + Quoted(memory) +
                                ": 'm' is thousandths of a byte in Kubernetes; Mi or M is meant");
  }
  const int64_t thousandths = Thousandths(number);
  // Whole bytes: thousandths × factor / 1000 without overflow for anything below 8 EiB.
  const long double bytes = static_cast<long double>(thousandths) * factor / 1000;
  if (thousandths < 0 || bytes >= 9.2e18L) {
    return InvalidArgumentError("memory " + Quoted(memory) +
                                " is not a memory quantity (bytes, or a number with Ki, Mi, Gi, "
                                "Ti, k, M, G or T: \"4Gi\", \"512Mi\")");
  }
  return static_cast<int64_t>(bytes);
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view duration) {
  static constexpr Unit kUnits[] = {
      {"ms", 1}, {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
  const auto bad = [&] {
    return InvalidArgumentError("duration " + Quoted(duration) +
                                " is not a duration (a number with d, h, m, s or ms: \"30m\", "
                                "\"1h30m\", \"10s\")");
  };
  if (AllDigits(duration) && !duration.empty() && duration.size() < 12) {
    return std::chrono::milliseconds(*ParseInt64(duration) * 1000);
  }
  std::string_view rest = duration;
  int64_t total = 0;
  while (!rest.empty()) {
    size_t digits = 0;
    while (digits < rest.size() &&
           ((rest[digits] >= '0' && rest[digits] <= '9') || rest[digits] == '.')) {
      ++digits;
    }
    const int64_t t = Thousandths(rest.substr(0, digits));
    if (t < 0) return bad();
    rest.remove_prefix(digits);
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (rest.substr(0, u.suffix.size()) == u.suffix) {
        unit = &u;
        break;
      }
    }
    if (unit == nullptr) return bad();
    rest.remove_prefix(unit->suffix.size());
    total += static_cast<int64_t>(static_cast<long double>(t) * unit->factor / 1000);
    if (total > int64_t{1} << 50) return bad();
  }
  if (duration.empty()) return bad();
  return std::chrono::milliseconds(total);
}

std::string FormatCpu(int64_t millicores) {
  if (millicores % 1000 == 0) return std::to_string(millicores / 1000);
  if (millicores % 100 == 0) {
    return std::to_string(millicores / 1000) + "." + std::to_string(millicores % 1000 / 100);
  }
  return std::to_string(millicores) + "m";
}

std::string FormatMemory(int64_t bytes) {
  static constexpr std::pair<const char*, int> kUnits[] = {{"Ei", 60}, {"Pi", 50}, {"Ti", 40},
                                                           {"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
  for (const auto& [suffix, shift] : kUnits) {
    const int64_t half = int64_t{1} << (shift - 1);
    if (bytes >= 2 * half && bytes % half == 0) {
      const int64_t halves = bytes / half;
      return std::to_string(halves / 2) + (halves % 2 != 0 ? ".5" : "") + suffix;
    }
  }
  return std::to_string(bytes);
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  int64_t ms = duration.count();
  if (ms == 0) return "0s";
  std::string out;
  for (const auto& [suffix, unit] : {std::pair<const char*, int64_t>{"d", 86400000},
                                     {"h", 3600000},
                                     {"m", 60000},
                                     {"s", 1000},
                                     {"ms", 1}}) {
    if (ms >= unit) {
      out += std::to_string(ms / unit) + suffix;
      ms %= unit;
    }
  }
  return out;
}

Result<std::vector<int>> ParseCpuList(std::string_view list) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError("cpu list '" + std::string(list) + "': " + why +
                                " (expected core numbers and ranges, like 0-3,6)");
  };
  if (!list.empty() && list.back() == ',') return bad("a trailing comma");
  std::vector<int> cores;
  size_t at = 0;
  while (at < list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view item = list.substr(at, comma - at);
    const size_t dash = item.find('-');
    const std::optional<int64_t> first = ParseInt64(item.substr(0, dash));
    const std::optional<int64_t> last =
        dash == std::string_view::npos ? first : ParseInt64(item.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last > 4095) {
      return bad("'" + std::string(item) + "' is not a core or a range");
    }
    for (int64_t c = *first; c <= *last; ++c) cores.push_back(static_cast<int>(c));
    at = comma + 1;
  }
  std::sort(cores.begin(), cores.end());
  if (std::adjacent_find(cores.begin(), cores.end()) != cores.end()) return bad("a core twice");
  return cores;
}

std::string FormatCpuList(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cores[i]);
    if (j > i) out += "-" + std::to_string(cores[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace reel
