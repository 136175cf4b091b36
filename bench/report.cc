#include "bench/report.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

namespace reel::bench {
namespace {

double MemoryGiB() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * page / (1 << 30) : 0;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "unset";
}

nlohmann::json OrNull(const std::optional<Reference>& r, bool ratio, double value) {
  if (!r) return nullptr;
  if (!ratio) return r->value;
  return r->value != 0 ? nlohmann::json(value / r->value) : nlohmann::json(nullptr);
}

std::string Cell(const std::optional<Reference>& r, double value) {
  if (!r) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.4g (%.3gx)", r->value,
                r->value != 0 ? value / r->value : 0.0);
  return buffer;
}

}  // namespace

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string MachineDescription(int threads) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer,
                "%ld cores (%s), %.0f GiB; %d threads used; OMP_NUM_THREADS=%s OMP_WAIT_POLICY=%s",
                ::sysconf(_SC_NPROCESSORS_ONLN), CpuModel().c_str(), MemoryGiB(), threads,
                Env("OMP_NUM_THREADS").c_str(), Env("OMP_WAIT_POLICY").c_str());
  return buffer;
}

Report::Report(std::string bench, int threads) : bench_(std::move(bench)), threads_(threads) {}

void Report::Add(Figure figure) { figures_.push_back(std::move(figure)); }

int Report::Finish(const std::string& json_path) const {
  const std::string machine = MachineDescription(threads_);
  std::printf("\n%s on %s\n", bench_.c_str(), machine.c_str());
  std::printf("%-52s %11s %-12s %-22s %-22s  %s\n", "figure", "value", "unit", "limit (ratio)",
              "peer (ratio)", "limit / peer");
  for (const Figure& f : figures_) {
    std::string names = (f.limit ? f.limit->name : "-") + " / " + (f.peer ? f.peer->name : "-");
    std::printf("%-52s %11.4g %-12s %-22s %-22s  %s\n", f.name.c_str(), f.value, f.unit.c_str(),
                Cell(f.limit, f.value).c_str(), Cell(f.peer, f.value).c_str(), names.c_str());
  }
  if (json_path.empty()) return 0;
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"bench", bench_}, {"machine", machine}, {"threads", threads_}});
  for (const Figure& f : figures_) {
    out.push_back({{"name", f.name},
                   {"value", f.value},
                   {"unit", f.unit},
                   {"limit", OrNull(f.limit, false, f.value)},
                   {"limit_ratio", OrNull(f.limit, true, f.value)},
                   {"limit_name", f.limit ? nlohmann::json(f.limit->name) : nullptr},
                   {"peer", OrNull(f.peer, false, f.value)},
                   {"peer_ratio", OrNull(f.peer, true, f.value)},
                   {"peer_name", f.peer ? nlohmann::json(f.peer->name) : nullptr}});
  }
  std::ofstream file(json_path);
  file << out.dump(2) << "\n";
  if (!file.flush()) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", bench_.c_str(), json_path.c_str(),
                 std::strerror(errno));
    return 1;
  }
  return 0;
}

std::string TakeJsonFlag(int* argc, char** argv) {
  std::string path;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < *argc) {
      path = argv[++i];
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return path;
}

}  // namespace reel::bench
