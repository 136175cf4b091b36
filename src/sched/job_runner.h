// How the daemon's jobs run, one file per engine (local_job_runner.cc: a supervisor per job on
// this machine; slurm_job_runner.cc: a Slurm batch job per job). The scheduler core decides who
// runs where; a runner only starts, signals and watches.
// Thread-safety: used under the daemon's mutex.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sched/jobs.h"
#include "sched/scheduler.h"

namespace reel::sched::internal {

struct JobEnd {
  int exit_code = 0;  // -1 when a signal ended it
  int signal = 0;
  std::string reason;  // what the engine says beyond the code ("over its memory: ...")
};

class JobRunner {
 public:
  virtual ~JobRunner() = default;
  // Starts `job`'s workers on `nodes` (one per worker) and returns the handle to record in
  // job.shim_pid: the supervisor's pid, or the Slurm job id. Worker i writes `dir`/worker-i.log.
  virtual Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                                const std::string& dir) = 0;
  // SIGTERM (let it stop at a checkpoint) or SIGKILL, to every process of the job.
  virtual void Signal(const JobRecord& job, int signal) = 0;
  // Its end, or nullopt while it runs (a job whose engine lost it has ended too).
  virtual std::optional<JobEnd> Poll(const JobRecord& job, const std::string& dir) = 0;
  // A job found running after a restart of the daemon: whatever the runner hands out per job
  // (GPU indices) is taken again from what `dir` records.
  virtual void Adopt(const JobRecord& job, const std::string& dir) {
    (void)job;
    (void)dir;
  }
  // A job whose start was recorded without its handle (its daemon died in between): the handle
  // when it did start, nullopt when it did not (it is then started again).
  virtual std::optional<int64_t> Find(const JobRecord& job, const std::string& dir) {
    (void)job;
    (void)dir;
    return std::nullopt;
  }
};

// `reel_binary` runs the supervisors. `nodes`: the cluster's, for their GPU counts: each worker
// gets CUDA_VISIBLE_DEVICES with the indices it was handed on its node (none: ""), so two jobs
// never share a GPU; on the machine's own node ("local") the indices name the GPUs that
// CUDA_VISIBLE_DEVICES listed for the daemon. `cores`: per node, the machine's cores its
// workers are pinned to, as kubelet's static CPU manager does: a worker asking for whole CPUs
// gets that many cores of its own; others share the node's cores that no one holds (none
// listed: not pinned).
using CoreMap = std::map<std::string, std::vector<int>>;
std::unique_ptr<JobRunner> MakeLocalJobRunner(std::string reel_binary,
                                              const std::vector<Node>& nodes,
                                              const CoreMap& cores = {});
// Batch jobs on the Slurm cluster SLURM_CONF names (sbatch, squeue, scontrol, scancel).
std::unique_ptr<JobRunner> MakeSlurmJobRunner(std::string reel_binary, std::string partition);

// The nodes Slurm reports (sinfo): names, CPUs, memory, GPUs (gres gpu:N). Errors: Unavailable
// when sinfo fails.
Result<std::vector<Node>> SlurmNodes(const std::string& partition);

}  // namespace reel::sched::internal
