// Who this process is in a distributed job: its rank, the world size, where to rendezvous.
//
// WorldFromEnvironment reads the variables the common launchers set, so `reel train` drops into
// existing clusters:
//   - torchrun, Kubeflow's PyTorchJob, Reel's own launcher: RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE, GROUP_RANK (node), MASTER_ADDR, MASTER_PORT;
//   - Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES, with
//     MASTER_ADDR defaulting to the first host of SLURM_JOB_NODELIST.
// With none of them set, the world is one process (not distributed).
// Reel's launcher also sets REEL_AGENT_STORE=1 (the launcher, not rank 0, hosts the rendezvous
// store and keeps it across restarts) and REEL_RESTART_GENERATION (keys are scoped to it).
//
// Errors: InvalidArgument naming the variable (not a number, rank outside the world, a
// distributed world without MASTER_ADDR).
// Thread-safety: plain functions and values.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"

namespace reel::parallel {

struct WorldInfo {
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // the launcher hosts the store; every rank connects as a client
  int generation = 0;        // restarts so far
  std::string source;  // whose variables were read ("torchrun", "reel launcher", "slurm", "none")

  bool distributed() const { return world_size > 1; }
  std::string ToString() const;
};

using GetEnv = std::function<const char*(const char*)>;

Result<WorldInfo> WorldFromEnvironment(const GetEnv& getenv);
Result<WorldInfo> WorldFromEnvironment();  // the process's environment

// The first host of a Slurm node list: "node[03-05,7]" -> "node03", "a,b" -> "a".
std::string FirstSlurmHost(const std::string& nodelist);

}  // namespace reel::parallel
