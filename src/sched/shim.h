// A job's supervisor (Slurm's slurmstepd, containerd's shim): one process per running job that
// the daemon starts in a session of its own and that outlives the daemon, so a scheduler killed
// with -9 leaves its jobs running and finds them again on restart. It starts the job's workers,
// waits for them, enforces the job's memory, and writes how the job ended to a file the daemon
// reads (the daemon need not be its parent).
//
// Its folder holds launch.json (written by the daemon):
//   {"workers": [{"argv": [...], "env": ["NAME=value", ...], "log": "/path"}], "workdir": "...",
//    "memory_bytes": 0, "poll_ms": 100}
// and, when every worker has exited, exit.json (written atomically by the shim):
//   {"exit_code": 0, "signal": 0, "reason": "", "workers": [{"exit_code": 0, "signal": 0}]}
// exit_code: 0 when all succeeded; 75 when all stopped preempted (base/stop_request.h); else the
// first failure's (-1 when a signal ended it). A worker that fails stops the others (a gang
// lives and dies together). Memory: the RSS of every process in the job's session is summed
// every poll; past memory_bytes (when > 0) they are all killed and the reason says so (Slurm's
// OverMemoryKill; a cgroup v2 limit is the better tool where the host lets us write one).
// SIGTERM to the session reaches the workers; the shim itself waits on.
#pragma once

#include <string>

namespace reel::sched {

// Runs the job in `dir`; returns the process's exit code (0 once exit.json is written).
int RunShim(const std::string& dir);

}  // namespace reel::sched
