#include "parallel/world.h"

#include <cstdlib>

namespace reel::parallel {
namespace {

Result<int> IntVar(const GetEnv& getenv, const char* name, int fallback, int min, int max) {
  const char* raw = getenv(name);
  if (raw == nullptr || *raw == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(raw, &end, 10);
  if (*end != '\0' || value < min || value > max) {
    return InvalidArgumentError(std::string("environment variable ") + name + "='" + raw +
                                "' must be an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
  }
  return static_cast<int>(value);
}

std::string StrVar(const GetEnv& getenv, const char* name) {
  const char* raw = getenv(name);
  return raw == nullptr ? std::string() : std::string(raw);
}

// Slurm's SLURM_NTASKS_PER_NODE-style counts look like "2(x3),1"; the first count is ours when
// tasks are spread evenly, which is what data-parallel jobs ask for.
int FirstSlurmCount(const std::string& text, int fallback) {
  if (text.empty()) return fallback;
  int value = std::atoi(text.c_str());
  return value > 0 ? value : fallback;
}

}  // namespace

std::string FirstSlurmHost(const std::string& nodelist) {
  std::string first = nodelist.substr(0, nodelist.find(','));
  size_t open = nodelist.find('[');
  if (open == std::string::npos || open > nodelist.find(',')) return first;
  // "prefix[03-05,7]suffix": the prefix and the first number, zero padding kept.
  size_t close = nodelist.find(']', open);
  std::string range =
      nodelist.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1);
  std::string lowest = range.substr(0, range.find_first_of(",-"));
  std::string suffix = close == std::string::npos ? "" : nodelist.substr(close + 1);
  suffix = suffix.substr(0, suffix.find(','));
  return nodelist.substr(0, open) + lowest + suffix;
}

std::string WorldInfo::ToString() const {
  return "rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " (node " +
         std::to_string(node_rank) + "/" + std::to_string(nnodes) + ", local " +
         std::to_string(local_rank) + "/" + std::to_string(local_world_size) + ", rendezvous " +
         master_addr + ":" + std::to_string(master_port) + ", from " + source + ")";
}

Result<WorldInfo> WorldFromEnvironment(const GetEnv& getenv) {
  WorldInfo w;
  const bool torchrun = !StrVar(getenv, "WORLD_SIZE").empty() || !StrVar(getenv, "RANK").empty();
  const bool slurm = !torchrun && !StrVar(getenv, "SLURM_PROCID").empty() &&
                     !StrVar(getenv, "SLURM_NTASKS").empty();
  constexpr int kMaxRanks = 1 << 20;
  if (torchrun) {
    w.source = "torchrun";
    REEL_ASSIGN_OR_RETURN(w.world_size, IntVar(getenv, "WORLD_SIZE", 1, 1, kMaxRanks));
    REEL_ASSIGN_OR_RETURN(w.rank, IntVar(getenv, "RANK", 0, 0, kMaxRanks));
    // Without LOCAL_* (Kubeflow's PyTorchJob): one process per node.
    REEL_ASSIGN_OR_RETURN(w.local_rank, IntVar(getenv, "LOCAL_RANK", 0, 0, kMaxRanks));
    REEL_ASSIGN_OR_RETURN(w.local_world_size, IntVar(getenv, "LOCAL_WORLD_SIZE", 1, 1, kMaxRanks));
    REEL_ASSIGN_OR_RETURN(w.node_rank,
                          IntVar(getenv, "GROUP_RANK", w.rank / w.local_world_size, 0, kMaxRanks));
  } else if (slurm) {
    w.source = "slurm";
    REEL_ASSIGN_OR_RETURN(w.world_size, IntVar(getenv, "SLURM_NTASKS", 1, 1, kMaxRanks));
    REEL_ASSIGN_OR_RETURN(w.rank, IntVar(getenv, "SLURM_PROCID", 0, 0, kMaxRanks));
    REEL_ASSIGN_OR_RETURN(w.local_rank, IntVar(getenv, "SLURM_LOCALID", 0, 0, kMaxRanks));
    w.local_world_size = FirstSlurmCount(StrVar(getenv, "SLURM_NTASKS_PER_NODE"), 1);
    REEL_ASSIGN_OR_RETURN(w.node_rank, IntVar(getenv, "SLURM_NODEID", 0, 0, kMaxRanks));
    REEL_ASSIGN_OR_RETURN(w.nnodes, IntVar(getenv, "SLURM_NNODES", 1, 1, kMaxRanks));
  } else {
    w.source = "none";
    return w;
  }
  if (w.rank >= w.world_size) {
    return InvalidArgumentError("rank " + std::to_string(w.rank) + " is outside a world of " +
                                std::to_string(w.world_size) + " processes (" +
                                (torchrun ? "RANK/WORLD_SIZE" : "SLURM_PROCID/SLURM_NTASKS") + ")");
  }
  if (w.local_rank >= w.local_world_size && torchrun) {
    return InvalidArgumentError("LOCAL_RANK " + std::to_string(w.local_rank) +
                                " is not below LOCAL_WORLD_SIZE " +
                                std::to_string(w.local_world_size));
  }
  if (torchrun) {
    w.nnodes = std::max(1, (w.world_size + w.local_world_size - 1) / w.local_world_size);
  }
  w.master_addr = StrVar(getenv, "MASTER_ADDR");
  if (w.master_addr.empty() && slurm)
    w.master_addr = FirstSlurmHost(StrVar(getenv, "SLURM_JOB_NODELIST"));
  if (w.master_addr.empty()) {
    if (w.world_size > 1) {
      return InvalidArgumentError(
          "a world of " + std::to_string(w.world_size) +
          " processes needs MASTER_ADDR (the host of rank 0's rendezvous store)");
    }
    w.master_addr = "127.0.0.1";
  }
  REEL_ASSIGN_OR_RETURN(w.master_port, IntVar(getenv, "MASTER_PORT", 29500, 1, 65535));
  w.agent_store = StrVar(getenv, "REEL_AGENT_STORE") == "1";
  if (w.agent_store) w.source = "reel launcher";
  REEL_ASSIGN_OR_RETURN(w.generation, IntVar(getenv, "REEL_RESTART_GENERATION", 0, 0, kMaxRanks));
  return w;
}

Result<WorldInfo> WorldFromEnvironment() {
  return WorldFromEnvironment([](const char* name) { return std::getenv(name); });
}

}  // namespace reel::parallel
