// reel sched simulate: a job trace replayed through the scheduler's core, one row per policy.
//   reel sched simulate --trace testdata/traces/philly.csv [--policy fifo,las] [--no-backfill]
//                       [--nodes N] [--gpus-per-node 8] [--json FILE]
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "apps/reel/commands.h"
#include "sched/simulate.h"

namespace reel::cli {
namespace simulate_cmd {

struct Flags {
  std::string trace;
  std::string policies = "fifo,priority,sjf,las,drf";
  std::string backfill = "both";  // on, off, both
  int nodes = 0;
  int gpus_per_node = 8;
  std::string json;
};

struct Row {
  sched::SimulationOptions options;
  sched::SimulationResult result;
};

Result<std::vector<sched::SimulationOptions>> Runs(const Flags& f) {
  std::vector<bool> backfill;
  if (f.backfill == "on" || f.backfill == "both") backfill.push_back(true);
  if (f.backfill == "off" || f.backfill == "both") backfill.push_back(false);
  if (backfill.empty()) {
    return InvalidArgumentError("--backfill must be on, off or both, got '" + f.backfill + "'");
  }
  std::vector<sched::SimulationOptions> runs;
  std::istringstream list(f.policies);
  for (std::string name; std::getline(list, name, ',');) {
    REEL_ASSIGN_OR_RETURN(sched::Policy policy, sched::ParsePolicy(name));
    for (bool b : backfill) runs.push_back({policy, b, f.nodes, f.gpus_per_node});
  }
  if (runs.empty()) return InvalidArgumentError("--policy names no policy");
  return runs;
}

std::string Hours(double seconds) {
  char out[32];
  std::snprintf(out, sizeof out, "%.2f", seconds / 3600);
  return out;
}

void PrintTable(const std::vector<Row>& rows, size_t jobs, double wall_s) {
  std::printf("%zu jobs on %d nodes x %d GPUs; times in hours\n", jobs, rows.front().result.nodes,
              rows.front().options.gpus_per_node);
  std::printf("%-9s %-8s %9s %9s %9s %10s %6s %8s %7s\n", "POLICY", "BACKFILL", "AVG JCT",
              "P95 JCT", "AVG WAIT", "MAKESPAN", "UTIL", "PREEMPT", "WALL S");
  for (const Row& r : rows) {
    std::printf("%-9s %-8s %9s %9s %9s %10s %5.1f%% %8lld %7.2f\n",
                sched::PolicyName(r.options.policy), r.options.backfill ? "on" : "off",
                Hours(r.result.avg_jct_s).c_str(), Hours(r.result.p95_jct_s).c_str(),
                Hours(r.result.avg_queue_s).c_str(), Hours(r.result.makespan_s).c_str(),
                100 * r.result.utilisation, static_cast<long long>(r.result.preemptions),
                r.result.wall_s);
  }
  std::printf("the whole table in %.1f s\n", wall_s);
}

Status WriteJson(const std::string& path, const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    out.push_back({{"policy", sched::PolicyName(r.options.policy)},
                   {"backfill", r.options.backfill},
                   {"nodes", r.result.nodes},
                   {"jobs", r.result.jobs},
                   {"avg_jct_s", r.result.avg_jct_s},
                   {"p95_jct_s", r.result.p95_jct_s},
                   {"avg_queue_s", r.result.avg_queue_s},
                   {"makespan_s", r.result.makespan_s},
                   {"utilisation", r.result.utilisation},
                   {"preemptions", r.result.preemptions},
                   {"wall_s", r.result.wall_s}});
  }
  std::ofstream file(path);
  file << out.dump(2) << "\n";
  if (!file) return InternalError("cannot write " + path);
  return Status::Ok();
}

Status RunSimulate(const Flags& f) {
  REEL_ASSIGN_OR_RETURN(std::vector<sched::TraceJob> jobs, sched::ReadPhillyTrace(f.trace));
  REEL_ASSIGN_OR_RETURN(std::vector<sched::SimulationOptions> runs, Runs(f));
  std::vector<Row> rows;
  double wall_s = 0;
  for (const sched::SimulationOptions& o : runs) {
    REEL_ASSIGN_OR_RETURN(sched::SimulationResult result, sched::Simulate(jobs, o));
    wall_s += result.wall_s;
    rows.push_back({o, result});
  }
  PrintTable(rows, jobs.size(), wall_s);
  return f.json.empty() ? Status::Ok() : WriteJson(f.json, rows);
}

}  // namespace simulate_cmd

void RegisterSimulate(CLI::App& app, int* exit_code) {
  static simulate_cmd::Flags f;
  CLI::App* sched = app.add_subcommand("sched", "scheduling studies");
  sched->require_subcommand(1);
  CLI::App* simulate = sched->add_subcommand(
      "simulate", "replay a job trace through the scheduler's core, one row per policy");
  simulate->add_option("--trace", f.trace, "the Philly trace's CSV")->required();
  simulate->add_option("--policy", f.policies, "comma-separated: fifo,priority,sjf,las,drf");
  simulate->add_option("--backfill", f.backfill, "on, off or both (default)");
  simulate->add_option("--nodes", f.nodes, "cluster size (default: the trace's load at 80%)")
      ->check(CLI::NonNegativeNumber);
  simulate->add_option("--gpus-per-node", f.gpus_per_node, "default 8")->check(CLI::PositiveNumber);
  simulate->add_option("--json", f.json, "also write the rows as JSON");
  simulate->callback([exit_code] {
    const Status status = simulate_cmd::RunSimulate(f);
    if (!status.ok()) std::fprintf(stderr, "reel sched simulate: %s\n", status.message().c_str());
    *exit_code = status.ok() ? 0 : ExitCodeFor(status);
  });
}

}  // namespace reel::cli
