// An executor runs the processes the runner decided to start: this machine's (LocalExecutor) now,
// Slurm's and Kubernetes' later, as Kueue leaves pods to Kubernetes. The runner decides what
// starts when; an executor only starts, signals and reports exits.
// Thread-safety: an Executor is used from one thread (the runner's).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "sched/pipeline.h"

namespace reel::sched {

struct Launch {
  std::string task;               // for messages
  std::vector<std::string> argv;  // argv[0]: a path (the runner resolves names on PATH)
  std::vector<std::string> env;   // the whole environment, "NAME=value"
  std::string workdir;
  std::string log_path;  // standard output and error, appended
  Resources resources;   // what the task asked for (an executor backed by a scheduler needs it)
};

struct Exit {
  int64_t id = 0;
  int exit_code = 0;  // the process's status, or -1 when a signal ended it
  int signal = 0;     // the signal that ended it, else 0
  bool ok() const { return exit_code == 0; }
};

// "exit 3", "killed by SIGKILL".
std::string ExitText(const Exit& exit);

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts a process and returns its id. Errors: NotFound when the log cannot be opened,
  // Internal when the process cannot be started (a program that cannot be executed exits 127).
  virtual Result<int64_t> Start(const Launch& launch) = 0;
  // Asks the process and everything it started to stop: SIGTERM now, SIGKILL once `grace` has
  // passed (what Kubernetes does with terminationGracePeriodSeconds).
  virtual void Terminate(int64_t id, std::chrono::milliseconds grace) = 0;
  // The next exit, or nullopt once `deadline` passes with none.
  virtual std::optional<Exit> Wait(Clock::TimePoint deadline) = 0;
  // How many started processes have not been reported by Wait yet.
  virtual size_t running() const = 0;
};

// Tasks as jobs of `reel scheduler serve` at `url` (sched/daemon.h): the scheduler queues and
// places them; Terminate cancels; a finished job's output is appended to the task's log.
// Errors of Start: the scheduler's answer (a task it can never place is InvalidArgument).
std::unique_ptr<Executor> MakeSchedulerExecutor(std::string url);

// Processes on this machine, each leading its own process group (a task's children are stopped
// with it, and whatever it leaves behind is killed when it exits). Processes die with this one
// (PR_SET_PDEATHSIG). Deadlines are on the system's steady clock.
std::unique_ptr<Executor> MakeLocalExecutor();

}  // namespace reel::sched
