// Jobs as Slurm batch jobs: Reel decides admission, order and placement (Kueue's split); Slurm
// runs the gang as one allocation on the nodes chosen, one `srun` task per worker.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/files.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "sched/job_runner.h"
#include "sched/runner_internal.h"

namespace reel::sched::internal {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The value of KEY=VALUE in `scontrol show job -o` output, "" when absent.
std::string Field(const std::string& line, const std::string& key) {
  const std::string needle = " " + key + "=";
  size_t at = (" " + line).find(needle);
  if (at == std::string::npos) return "";
  at += needle.size() - 1;
  const size_t end = line.find(' ', at);
  return line.substr(at, end == std::string::npos ? end : end - at);
}

bool Terminal(const std::string& state) {
  static const std::set<std::string> kEnded = {"COMPLETED", "FAILED",    "CANCELLED",
                                               "TIMEOUT",   "NODE_FAIL", "PREEMPTED",
                                               "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
  return kEnded.count(state) != 0;
}

// The batch script: every worker is an srun task that gets torchrun's variables from Slurm's.
std::string Script(const JobRecord& job, const std::vector<std::string>& argv,
                   const std::string& dir) {
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000)) REEL_JOB_ID="
    << ShellQuote(job.spec.id) << "\n";
  for (const auto& [k, v] : job.env) s << "export " << k << "=" << ShellQuote(v) << "\n";
  // --wait: once one task ends the others get a minute to follow (a preempted rank's peers are
  // writing their checkpoint), then Slurm stops them.
  s << "exec srun --wait=60 --open-mode=append --output=" << ShellQuote(dir + "/worker-%t.log")
    << " bash -c 'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
       "REEL_NODE=$SLURMD_NODENAME; exec \"$@\"' reel-worker";
  for (const std::string& a : argv) s << " " << ShellQuote(a);
  s << "\n";
  return s.str();
}

class SlurmJobRunner : public JobRunner {
 public:
  SlurmJobRunner(std::string reel_binary, std::string partition)
      : reel_binary_(std::move(reel_binary)), partition_(std::move(partition)) {}

  Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) override {
    std::vector<std::string> argv = job.command;
    REEL_ASSIGN_OR_RETURN(argv[0], ResolveProgram(argv[0], reel_binary_));
    REEL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/job.sbatch", Script(job, argv, dir)));
    REEL_ASSIGN_OR_RETURN(CommandOutput out,
                          RunCommand(SbatchArgs(job, nodes, dir), CurrentEnvironment()));
    const std::string id = Trim(out.output.substr(0, out.output.find(';')));
    const std::optional<int64_t> number = ParseInt64(id);
    if (out.exit_code != 0 || !number) {
      return UnavailableError("sbatch refused job " + job.spec.id + ": " + Trim(out.output));
    }
    return *number;
  }

  void Signal(const JobRecord& job, int signal) override {
    if (job.shim_pid <= 0) return;
    // SIGTERM reaches the tasks (not the batch shell, which must live to collect their codes);
    // SIGKILL ends the whole job.
    std::vector<std::string> argv = {"scancel", std::to_string(job.shim_pid)};
    if (signal != SIGKILL) argv.insert(argv.begin() + 1, "--signal=" + std::to_string(signal));
    (void)RunCommand(argv, CurrentEnvironment());  // a job already gone is not an error here
  }

  // The batch job of that name Slurm still holds (earlier attempts have ended).
  std::optional<int64_t> Find(const JobRecord& job, const std::string& dir) override {
    (void)dir;
    Result<CommandOutput> out =
        RunCommand({"squeue", "-h", "-n", "reel-" + job.spec.id, "-o", "%i"}, CurrentEnvironment());
    if (!out.ok() || out->exit_code != 0) return std::nullopt;
    return ParseInt64(Trim(out->output.substr(0, out->output.find('\n'))));
  }

  std::optional<JobEnd> Poll(const JobRecord& job, const std::string& dir) override {
    (void)dir;
    // Each look costs a process and a round trip to slurmctld: twice a second is plenty.
    auto& last = last_poll_[job.spec.id];
    if (SteadyClock::now() - last < std::chrono::milliseconds(500)) return std::nullopt;
    last = SteadyClock::now();
    const std::string id = std::to_string(job.shim_pid);
    Result<CommandOutput> show =
        RunCommand({"scontrol", "show", "job", "-o", id}, CurrentEnvironment());
    if (!show.ok() || show->exit_code != 0) {
      last_poll_.erase(job.spec.id);
      return JobEnd{-1, SIGKILL, "Slurm no longer knows its job " + id};
    }
    const std::string state = Field(show->output, "JobState");
    if (!Terminal(state)) return std::nullopt;
    last_poll_.erase(job.spec.id);
    const std::string code = Field(show->output, "ExitCode");  // "75:0": status, signal
    const size_t colon = code.find(':');
    const int status = static_cast<int>(ParseInt64(code.substr(0, colon)).value_or(-1));
    const int sig = colon == std::string::npos
                        ? 0
                        : static_cast<int>(ParseInt64(code.substr(colon + 1)).value_or(0));
    JobEnd end{sig != 0 && status == 0 ? -1 : status, sig, ""};
    if (state != "COMPLETED" && state != "FAILED") end.reason = "Slurm job " + id + " " + state;
    return end;
  }

 private:
  std::vector<std::string> SbatchArgs(const JobRecord& job, const std::vector<std::string>& nodes,
                                      const std::string& dir) const {
    std::vector<std::string> distinct;
    for (const std::string& n : nodes) {
      if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
    }
    std::string list;
    for (const std::string& n : distinct) list += (list.empty() ? "" : ",") + n;
    const Resources& per = job.spec.per_worker;
    const int64_t cpus = std::max<int64_t>(1, (per.cpu_millis + 999) / 1000);
    std::vector<std::string> args = {"sbatch",
                                     "--parsable",
                                     "--job-name=reel-" + job.spec.id,
                                     "--nodes=" + std::to_string(distinct.size()),
                                     "--ntasks=" + std::to_string(nodes.size()),
                                     "--nodelist=" + list,
                                     "--cpus-per-task=" + std::to_string(cpus),
                                     "--output=" + dir + "/batch.log",
                                     "--open-mode=append"};
    if (!job.workdir.empty()) args.push_back("--chdir=" + job.workdir);
    if (!partition_.empty()) args.push_back("--partition=" + partition_);
    if (per.memory_bytes > 0) {
      const int64_t mib = (per.memory_bytes + cpus * (1 << 20) - 1) / (cpus * (1 << 20));
      args.push_back("--mem-per-cpu=" + std::to_string(mib) + "M");
    }
    if (per.gpu > 0) args.push_back("--gpus-per-task=" + std::to_string(per.gpu));
    if (job.spec.time_limit) {
      // Slurm counts minutes; Reel's own limit (the core's Stop) is the exact one.
      args.push_back("--time=" + std::to_string(job.spec.time_limit->count() / 60000 + 1));
    }
    args.push_back(dir + "/job.sbatch");
    return args;
  }

  std::string reel_binary_, partition_;
  std::map<std::string, SteadyClock::time_point> last_poll_;
};

}  // namespace

std::unique_ptr<JobRunner> MakeSlurmJobRunner(std::string reel_binary, std::string partition) {
  return std::make_unique<SlurmJobRunner>(std::move(reel_binary), std::move(partition));
}

Result<std::vector<Node>> SlurmNodes(const std::string& partition) {
  std::vector<std::string> argv = {"sinfo", "-h", "-N", "-o", "%N %c %m %G"};
  if (!partition.empty()) argv.push_back("--partition=" + partition);
  REEL_ASSIGN_OR_RETURN(CommandOutput out, RunCommand(argv, CurrentEnvironment()));
  if (out.exit_code != 0) return UnavailableError("sinfo: " + Trim(out.output));
  std::vector<Node> nodes;
  std::istringstream lines(out.output);
  std::string name, gres;
  int64_t cpus = 0, memory_mb = 0;
  while (lines >> name >> cpus >> memory_mb >> gres) {
    if (std::any_of(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == name; })) {
      continue;  // listed once per partition
    }
    int64_t gpus = 0;
    if (const size_t at = gres.find("gpu:"); at != std::string::npos) {
      gpus = ParseInt64(gres.substr(gres.rfind(':') + 1)).value_or(0);
    }
    nodes.push_back(Node{name, Resources{cpus * 1000, memory_mb << 20, gpus}, {}, false, 0});
  }
  if (nodes.empty()) return UnavailableError("sinfo lists no nodes: " + Trim(out.output));
  return nodes;
}

}  // namespace reel::sched::internal
