// Runs a pipeline to its end: tasks start in dependency order (Kahn) as far as the free resources
// allow, each as a process through an Executor; a task that fails is retried after a growing
// pause; one that outlives its timeout is stopped (SIGTERM, then SIGKILL) and counts as failed.
// Once a task has failed for good nothing new starts (Argo's failFast): the tasks still running
// finish, and what did not run is "skipped". Every change is recorded in the RunStore as it
// happens, so `reel pipeline status` shows it live and a killed runner leaves an accurate record.
//
// Step caching: a task's key hashes its command and environment with the inputs filled in, the
// keys of the tasks whose outputs it reads (not their paths: a cached task's outputs live in an
// earlier run), and the contents of local files and folders its arguments name (a config file,
// an input folder). A task whose key matches an earlier successful run's, and whose local
// outputs still exist, is not run: it is "cached" and its outputs are that run's.
//
// Environment of every task: REEL_RUN_ID, REEL_TASK, REEL_SCRATCH (a folder of its own, removed
// after the pipeline's ttl_after_finished), REEL_BIN (this reel binary, for scripts),
// CUDA_VISIBLE_DEVICES (the GPUs it was given, by index, when the machine has any), and the
// task's env. "reel" as a command's program is this reel binary.
//
// Thread-safety: one run at a time per RunStore and Executor.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "sched/executor.h"
#include "sched/pipeline.h"
#include "sched/run_store.h"

namespace reel::sched {

struct RunnerOptions {
  Resources capacity;  // what the tasks running at once may use together
  bool use_cache = true;
  std::chrono::milliseconds kill_grace{10000};  // SIGTERM to SIGKILL for a timed-out task
  Clock* clock = Clock::System();               // backoff and timeouts
  std::string reel_binary;  // what the program "reel" is; empty: this process's executable
  std::string workdir;      // where tasks run; empty: this process's working directory
  // What CUDA_VISIBLE_DEVICES names GPU i as; empty: "i" (VisibleGpuIds() for this machine).
  std::vector<std::string> gpu_ids;
  // Called after every change of a task's record (progress output).
  std::function<void(const RunRecord&, const TaskRecord&)> on_task;
  // Called with what a person should know that is not a task's state (a hook's outcome).
  std::function<void(const std::string&)> on_message;
};

// The GPUs CUDA_VISIBLE_DEVICES lists, in order (none when it is unset).
std::vector<std::string> VisibleGpuIds();

// The cores this process may run on (its affinity), ascending.
std::vector<int> AllowedCpus();

// This machine: its cores, its memory, and the GPUs CUDA_VISIBLE_DEVICES lists (none if unset).
Resources MachineCapacity();

// Records a new run of `pipeline` and runs it. Returns the run's final record: succeeded or
// failed (failed_task names the first task that failed). Errors: InvalidArgument, before anything
// runs, when a task asks for more than the capacity; Unavailable when the record cannot be
// written.
Result<RunRecord> RunPipeline(const Pipeline& pipeline, RunStore& store, Executor& executor,
                              const RunnerOptions& options);

// Runs again, in the same run, every task that did not succeed (failed, skipped, or interrupted
// with its runner) and so everything that depends on one; succeeded and cached tasks keep their
// outputs. Errors: NotFound for an unknown run; FailedPrecondition for a run that succeeded or
// is still running.
Result<RunRecord> RetryRun(const std::string& run_id, RunStore& store, Executor& executor,
                           const RunnerOptions& options);

}  // namespace reel::sched
