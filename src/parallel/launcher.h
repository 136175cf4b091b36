// The elastic launcher (Reel's torchrun): starts this node's worker processes for a data-parallel
// job, watches them, and when one fails stops them all and starts them again from the latest
// checkpoint, up to `max_restarts` times.
//
// Each worker is `worker_argv` run with the variables of parallel/world.h (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, REEL_AGENT_STORE=1,
// REEL_RESTART_GENERATION and TORCHELASTIC_RESTART_COUNT); restarts add `restart_args`
// (e.g. --resume). The launcher of node 0 hosts the rendezvous TCPStore for the whole job, so it
// outlives worker restarts; the launchers of other nodes connect to it.
// Across nodes, a failure anywhere bumps a restart counter in the store; every launcher watches
// it, stops its workers and joins the next generation, so all nodes restart together.
// With restart_alone, only the failed process is started again (see LaunchOptions).
// Workers die with their launcher (PR_SET_PDEATHSIG); SIGINT/SIGTERM to the launcher stop them
// (SIGTERM, then SIGKILL after the grace). After a SIGTERM, when every worker exited with
// kExitPreempted (base/stop_request.h: it stopped at a checkpoint), so does the job.
//
// Errors: InvalidArgument (options), Unavailable (the store cannot be hosted or reached, other
// nodes never join a generation), Internal (fork/exec failures). A job whose workers keep
// failing is not an error value: LaunchResult says which rank failed how, and exit_code is what
// the command should return.
// Thread-safety: one launcher per process (it handles SIGINT/SIGTERM and reaps children).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace reel::parallel {

struct LaunchOptions {
  int nproc = 1;  // workers on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (single node only)
  int max_restarts = 0;
  std::vector<std::string> worker_argv;   // program and arguments
  std::vector<std::string> restart_args;  // appended after a restart
  double connect_timeout_s = 300;         // for every node's launcher to join a generation
  double stop_grace_s = 10;               // SIGTERM, then SIGKILL after this long
  // A failed process is started again alone, with its rank and `restart_args`, while the others
  // keep running (parameter-server jobs: servers restart from their snapshots, a worker is
  // replaced); max_restarts counts these restarts. One node only.
  bool restart_alone = false;
};

struct LaunchResult {
  int exit_code = 0;
  int restarts = 0;
  std::string failure;  // the last failure, e.g. "rank 1 (pid 123) was killed by signal 9"
};

Result<LaunchResult> RunLauncher(const LaunchOptions& options);

}  // namespace reel::parallel
