// registry_bench's command line, clocks, shell and files, the machine, and the figures' output.
#include "bench/registry_bench_util.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/status.h"
#include "bench/report.h"
#include "testing/shell.h"

namespace reel::registry_bench {

// ---------------------------------------------------------------------------------------------
// Command line, clocks, shell.

namespace {

constexpr char kUsage[] =
    "usage: registry_bench [--work DIR] [--json FILE] [--reel PATH] [--threads N] [--batch N]\n"
    "                      [--frames N] [--size N] [--steps N] [--finetune-steps N]\n"
    "                      [--optimizer adamw|sgd] [--lr X] [--list-versions N] [--repeat N]\n"
    "                      [--list-repeat N] [--max-chain N] [--store-threads N] [--no-peers]\n"
    "                      [--keep] [--listing-only]\n";

Result<double> ParseNumber(const std::string& flag, const std::string& text, double min) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= min)) {
    return reel::InvalidArgumentError(flag + ": expected a number >= " + std::to_string(min) +
                                      ", got '" + text + "'");
  }
  return v;
}

}  // namespace

Result<Args> ParseArgs(int argc, char** argv) {
  Args a;
  std::map<std::string, std::string*> strings = {
      {"--work", &a.work}, {"--json", &a.json}, {"--reel", &a.reel}, {"--optimizer", &a.optimizer}};
  std::map<std::string, int*> ints = {{"--threads", &a.threads},
                                      {"--batch", &a.batch},
                                      {"--frames", &a.frames},
                                      {"--size", &a.size},
                                      {"--steps", &a.steps},
                                      {"--finetune-steps", &a.finetune_steps},
                                      {"--list-versions", &a.list_versions},
                                      {"--repeat", &a.repeat},
                                      {"--list-repeat", &a.list_repeat},
                                      {"--max-chain", &a.max_chain},
                                      {"--store-threads", &a.store_threads}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-peers") {
      a.peers = false;
      continue;
    }
    if (flag == "--keep") {
      a.keep = true;
      continue;
    }
    if (flag == "--listing-only") {
      a.listing_only = true;
      continue;
    }
    if (strings.count(flag) == 0 && ints.count(flag) == 0 && flag != "--lr") {
      return reel::InvalidArgumentError("unknown flag " + flag + "\n" + kUsage);
    }
    if (i + 1 >= argc) return reel::InvalidArgumentError(flag + ": needs a value\n" + kUsage);
    const std::string value = argv[++i];
    if (auto s = strings.find(flag); s != strings.end()) {
      *s->second = value;
    } else if (auto n = ints.find(flag); n != ints.end()) {
      REEL_ASSIGN_OR_RETURN(double v, ParseNumber(flag, value, 0));
      *n->second = static_cast<int>(v);
    } else {
      REEL_ASSIGN_OR_RETURN(a.lr, ParseNumber(flag, value, 0));
    }
  }
  if (a.checkpoints < 1 || a.repeat < 1 || a.list_repeat < 1 || a.list_versions < 2 ||
      a.batch < 1 || a.frames < 1 || a.size < 16 ||
      (a.optimizer != "adamw" && a.optimizer != "sgd")) {
    return reel::InvalidArgumentError(std::string("values out of range\n") + kUsage);
  }
  if (a.lr == 0) a.lr = a.optimizer == "sgd" ? 1e-3 : 1e-4;
  return a;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double ProcessCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void Progress(const std::string& what) {
  static const Clock::time_point start = Clock::now();
  std::fprintf(stderr, "[%6.1f s] %s\n", SecondsSince(start), what.c_str());
}

Result<std::string> Shell(const std::string& command, const std::string& log) {
  reel::testing::CommandResult r =
      reel::testing::RunCommand("(" + command + ") 2>>" + reel::testing::ShellQuote(log));
  if (r.exit_code == 0) return r.output;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return reel::InternalError("`" + command + "` exited with " + std::to_string(r.exit_code) + ": " +
                             all.substr(all.size() > 600 ? all.size() - 600 : 0));
}

Status MakeFolder(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return reel::InternalError("cannot create " + path + ": " + ec.message());
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return reel::InternalError("cannot write " + path);
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return reel::NotFoundError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB"};
  int u = 0;
  while (bytes >= 1000 && u < 3) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// The machine and the figures.

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

Machine DescribeMachine(int threads) {
  Machine m;
  m.cores = std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  m.cpu = bench::CpuModel();
  // Never more training threads than cores: oversubscribed OpenMP threads spin against each other.
  m.torch_threads = threads > 0 ? std::min(threads, m.cores) : m.cores;
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  m.omp_wait_policy = policy != nullptr ? policy : "unset";
  return m;
}

Figure MakeFigure(std::string section, std::string name, double value, std::string unit, Goal goal,
                  double limit) {
  Figure f;
  f.section = std::move(section);
  f.name = std::move(name);
  f.value = value;
  f.unit = std::move(unit);
  f.goal = goal;
  f.limit = limit;
  return f;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10000 ? "%.0f" : "%.4g", v);
  return buf;
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fx", r);
  return buf;
}

namespace {

std::string GoalText(const Figure& f) {
  if (f.goal == Goal::kNone) return "";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s %s",
                f.goal == Goal::kAtMost ? "<=" : ">=", Number(f.limit).c_str());
  return buf;
}

bool MeetsGoal(const Figure& f) {
  return f.goal == Goal::kAtMost ? f.value <= f.limit : f.value >= f.limit;
}

// Columns of a figure's row: what, value and unit, goal with the ratio to it and whether it is
// met, peer with the ratio to it, then the note.
constexpr char kRowFormat[] = "%-42s %9s %-5s  %-9s %9s %-6s  %-20s %9s %9s  %s";

// Prints one row of kRowFormat, without trailing blanks.
template <typename... T>
void PrintRow(T... columns) {
  char line[512];
  std::snprintf(line, sizeof line, kRowFormat, columns...);
  std::string text = line;
  text.erase(text.find_last_not_of(' ') + 1);
  std::puts(text.c_str());
}

void PrintFigure(const Figure& f) {
  const bool goal = f.goal != Goal::kNone && f.limit > 0;
  const bool peer = !f.peer_name.empty() && f.peer > 0;
  PrintRow(f.name.c_str(), Number(f.value).c_str(), f.unit.c_str(),
           goal ? GoalText(f).c_str() : "-", goal ? Ratio(f.value / f.limit).c_str() : "",
           goal ? (MeetsGoal(f) ? "meets" : "MISSES") : "", peer ? f.peer_name.c_str() : "-",
           peer ? Number(f.peer).c_str() : "", peer ? Ratio(f.value / f.peer).c_str() : "",
           f.note.c_str());
}

}  // namespace

void PrintFigures(const std::vector<Figure>& figures, const std::string& section) {
  PrintRow("", "value", "unit", "goal", "Reel/goal", "", "peer", "value", "Reel/peer", "");
  for (const Figure& f : figures) {
    if (f.section == section) PrintFigure(f);
  }
}

int ReportFigures(const std::vector<Figure>& figures, int threads, const std::string& json_path) {
  bench::Report report("registry_bench", threads);
  for (const Figure& f : figures) {
    std::optional<bench::Reference> limit, peer;
    if (f.goal != Goal::kNone && f.limit > 0) limit = bench::Reference{f.limit, "the goal"};
    if (!f.peer_name.empty() && f.peer > 0) peer = bench::Reference{f.peer, f.peer_name};
    report.Add({f.section + ": " + f.name, f.value, f.unit, limit, peer});
  }
  return report.Finish(json_path);
}

}  // namespace reel::registry_bench
