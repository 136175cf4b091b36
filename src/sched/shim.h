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
//   {"exit_code": 0, "signal": 0, "reason": "", "workers": [{"exit_code": 0, "signal": 0}],
//    "memory_enforcement": "cgroup v1"}
// exit_code: 0 when all succeeded; 75 when all stopped preempted (base/stop_request.h); else the
// first failure's (-1 when a signal ended it). A worker that fails stops the others (a gang
// lives and dies together). Memory (memory_bytes > 0): every worker, and so every process the
// job starts, joins a cgroup of its own limited to memory_bytes where the machine lets the shim
// write one (cgroup.h: v2, else v1), and the kernel kills past it; elsewhere the RSS of every
// process in the job's session is summed every poll and past memory_bytes they are all killed
// (Slurm's OverMemoryKill). Either way the reason says "over its memory", and
// memory_enforcement says which ("cgroup v2", "cgroup v1", "polling", "none").
// SIGTERM to the session reaches the workers; the shim itself waits on.
#pragma once

#include <string>

namespace reel::sched {

// Runs the job in `dir`; returns the process's exit code (0 once exit.json is written).
int RunShim(const std::string& dir);

}  // namespace reel::sched
