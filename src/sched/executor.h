// An executor runs the processes the runner decided to start: this machine's (LocalExecutor), the
// scheduler daemon's, or Kubernetes' (as Kueue leaves pods to Kubernetes). The runner decides what
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
#include "sched/kubectl.h"
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

struct K8sExecutorOptions {
  std::string image;  // the container image the tasks run in
  KubectlOptions kubectl;
  std::string kueue_queue, priority_class;  // "": no Kueue labels
  std::chrono::milliseconds poll{2000};     // how often Wait looks at the running Jobs
  Clock* clock = nullptr;                   // null: the system's
};

// Tasks as Kubernetes Jobs (k8s_job.h's objects, the same writer as `reel jobs submit
// --executor k8s`, applied and followed through kubectl.h): a task succeeds when its Job
// completes and fails (exit 1) when it fails; Terminate deletes its objects. The program runs by
// name from the image's PATH, with the environment the pipeline gives it (not this machine's);
// its outputs must go to storage the pods share (the pipeline's s3:// artifacts URI). Each
// Job's states and kubectl's reports go to the task's log.
std::unique_ptr<Executor> MakeK8sExecutor(K8sExecutorOptions options);

// Processes on this machine, each leading its own process group (a task's children are stopped
// with it, and whatever it leaves behind is killed when it exits). Processes die with this one
// (PR_SET_PDEATHSIG). Deadlines are on the system's steady clock.
std::unique_ptr<Executor> MakeLocalExecutor();

}  // namespace reel::sched
