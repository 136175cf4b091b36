// Starting child processes that must not outlive this one (training workers, serving replicas).
// Thread-safety: SpawnProcess may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel {

struct SpawnOptions {
  int stdout_fd = -1;  // >= 0: becomes the child's standard output (the caller closes its copy)
  int stderr_fd = -1;  // >= 0: becomes the child's standard error
  // The child leads a process group of its own, so that kill(-pid) reaches everything it starts.
  bool new_process_group = false;
  std::string workdir;  // non-empty: the child's working directory (exit 127 when it cannot be)
  // False: the child outlives this process (a job's supervisor that must survive its
  // scheduler's restart). It then leads a new session (setsid), away from our terminal's signals.
  bool die_with_parent = true;
  // cgroup.procs files the child writes itself into before exec, so that it starts inside those
  // cgroups (sched/cgroup.h); exit 127 when it cannot.
  std::vector<std::string> cgroup_procs;
  // Non-empty: the cores the child (and what it starts) may run on (sched_setaffinity); exit 127
  // when the kernel refuses them.
  std::vector<int> cpus;
};

// Runs argv[0] (a path) with `argv` and `env` ("NAME=value" each). The child is killed when this
// process dies (PR_SET_PDEATHSIG), even if that happens while it starts, unless
// options.die_with_parent is false. A program that cannot
// be executed exits 127 in the child. Errors: Internal when fork fails.
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, const SpawnOptions& options = {});

// `name` as an executable path: a name with a '/' as it is, anything else looked up on PATH.
// Errors: NotFound naming the program.
Result<std::string> FindProgram(const std::string& name);

// Whether `pid` is a live process: it exists and is not a zombie waiting to be reaped (by init,
// once the process that started it is gone).
bool ProcessRunning(int64_t pid);

// How a process ended, from waitpid's status: its exit code, or -1 and the signal that ended it.
struct ProcessEnd {
  int exit_code = 0;
  int signal = 0;
};
ProcessEnd DecodeWaitStatus(int status);

struct CommandOutput {
  int exit_code = 0;   // -1 when a signal ended it
  std::string output;  // standard output and error together (unless separate_errors)
  std::string errors;  // standard error, with separate_errors
};

// Runs argv[0] (a path, or a name looked up on PATH) to its end and returns its exit code and
// output (a command-line tool: sbatch, squeue). `separate_errors`: standard error apart, for
// output that is parsed (JSON). Errors: Internal when it cannot be started.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, bool separate_errors = false);

// This process's environment as "NAME=value" strings, with `overrides` replacing or adding.
std::vector<std::string> CurrentEnvironment(const std::vector<std::string>& overrides = {});

// This program's path (/proc/self/exe resolved), to start more of itself. Internal when it
// cannot be read.
Result<std::string> ThisProgram();

// This machine's name (gethostname), or "localhost" when it has none.
std::string MachineName();

}  // namespace reel
