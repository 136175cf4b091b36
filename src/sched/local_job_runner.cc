// Jobs on this machine: a supervisor (shim.h) per job, in a session of its own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/files.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "sched/job_runner.h"
#include "sched/runner.h"
#include "sched/runner_internal.h"

namespace reel::sched::internal {
namespace {

using nlohmann::json;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

// Things handed out by number, one holder each: a node's GPUs (by index) or its cores.
class Pool {
 public:
  void Add(const std::string& node, const std::vector<int>& ids) {
    for (int id : ids) slots_[node].push_back({id, ""});
  }
  bool Has(const std::string& node) const { return slots_.count(node) > 0; }
  // `count` free ones of `node` for `job`, taken; fewer when the node has fewer free (the
  // scheduler's counts make that a bug elsewhere, so the worker simply gets what is there).
  std::vector<int> Take(const std::string& node, int64_t count, const std::string& job) {
    std::vector<int> taken;
    for (auto& [id, holder] : Slots(node)) {
      if (static_cast<int64_t>(taken.size()) == count) break;
      if (!holder.empty()) continue;
      holder = job;
      taken.push_back(id);
    }
    return taken;
  }
  void Hold(const std::string& node, int id, const std::string& job) {
    for (auto& [i, holder] : Slots(node)) {
      if (i == id) holder = job;
    }
  }
  void Release(const std::string& job) {
    for (auto& [node, slots] : slots_) {
      for (auto& [id, holder] : slots) {
        if (holder == job) holder.clear();
      }
    }
  }
  // The ones of `node` no one holds; all of them when every one is held.
  std::vector<int> Unheld(const std::string& node) {
    std::vector<int> free, all;
    for (const auto& [id, holder] : Slots(node)) {
      all.push_back(id);
      if (holder.empty()) free.push_back(id);
    }
    return free.empty() ? all : free;
  }

 private:
  std::vector<std::pair<int, std::string>>& Slots(const std::string& node) { return slots_[node]; }
  std::map<std::string, std::vector<std::pair<int, std::string>>> slots_;
};

class LocalJobRunner : public JobRunner {
 public:
  LocalJobRunner(std::string reel_binary, const std::vector<Node>& nodes, const CoreMap& cores)
      : reel_binary_(std::move(reel_binary)) {
    for (const Node& n : nodes) {
      std::vector<int> indices(static_cast<size_t>(n.capacity.gpu));
      for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int>(i);
      gpus_.Add(n.name, indices);
    }
    for (const auto& [node, list] : cores) cores_.Add(node, list);
  }

  Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) override {
    Result<int64_t> shim = Spawn(job, nodes, dir);
    if (!shim.ok()) Release(job.spec.id);  // it never ran: nothing will report its end
    return shim;
  }

  void Signal(const JobRecord& job, int signal) override {
    if (job.shim_pid > 0) kill(-static_cast<pid_t>(job.shim_pid), signal);
  }

  void Adopt(const JobRecord& job, const std::string& dir) override {
    Result<std::string> text = ReadFileToString(dir + "/launch.json", "job launch file");
    Result<json> launch = text.ok() ? ParseJson(*text, "launch.json") : Result<json>(text.status());
    if (!launch.ok() || !launch->is_object()) return;
    for (const auto& [key, pool] :
         {std::pair<const char*, Pool*>{"gpus", &gpus_}, {"cores", &cores_}}) {
      if (!launch->contains(key) || !(*launch)[key].is_object()) continue;
      for (const auto& [node, ids] : (*launch)[key].items()) {
        for (const json& i : ids) {
          if (i.is_number_integer()) pool->Hold(node, i.get<int>(), job.spec.id);
        }
      }
    }
  }

  // Its supervisor is the process running `reel jobs shim DIR`.
  std::optional<int64_t> Find(const JobRecord& job, const std::string& dir) override {
    (void)job;
    const std::string wanted = std::string("jobs") + '\0' + "shim" + '\0' + dir + '\0';
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
      const std::optional<int64_t> pid = ParseInt64(entry.path().filename().string());
      if (!pid) continue;
      Result<std::string> cmdline = ReadFileToString(entry.path().string() + "/cmdline", "");
      if (!cmdline.ok()) continue;
      const size_t first = cmdline->find('\0');
      if (first != std::string::npos &&
          cmdline->compare(first + 1, std::string::npos, wanted) == 0) {
        return *pid;
      }
    }
    return std::nullopt;
  }

  std::optional<JobEnd> Poll(const JobRecord& job, const std::string& dir) override {
    std::optional<JobEnd> end = Ended(job, dir);
    if (end) Release(job.spec.id);
    return end;
  }

 private:
  void Release(const std::string& job) {
    gpus_.Release(job);
    cores_.Release(job);
  }

  Result<int64_t> Spawn(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) {
    std::error_code error;
    std::filesystem::remove(dir + "/exit.json", error);
    std::filesystem::create_directories(dir + "/scratch", error);
    REEL_ASSIGN_OR_RETURN(json launch, LaunchFile(job, nodes, dir));
    REEL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/launch.json", launch.dump()));
    REEL_ASSIGN_OR_RETURN(std::string reel, ResolveProgram("reel", reel_binary_));
    SpawnOptions options;
    options.die_with_parent = false;  // it outlives a daemon killed with -9
    REEL_ASSIGN_OR_RETURN(const pid_t shim,
                          SpawnProcess({reel, "jobs", "shim", dir}, CurrentEnvironment(), options));
    return static_cast<int64_t>(shim);
  }

  std::optional<JobEnd> Ended(const JobRecord& job, const std::string& dir) {
    const std::string exit_file = dir + "/exit.json";
    std::error_code error;
    if (std::filesystem::exists(exit_file, error)) {
      Result<std::string> text = ReadFileToString(exit_file, "job exit file");
      Result<json> exit = text.ok() ? ParseJson(*text, exit_file) : Result<json>(text.status());
      if (!exit.ok() || !exit->is_object()) return JobEnd{-1, 0, "unreadable exit file"};
      return JobEnd{exit->value("exit_code", -1), exit->value("signal", 0),
                    exit->value("reason", std::string())};
    }
    if (job.shim_pid <= 0 || !ProcessRunning(job.shim_pid))
      return JobEnd{-1, SIGKILL, "its supervisor ended without a report"};
    return std::nullopt;
  }

  // CUDA_VISIBLE_DEVICES for `indices` on `node` (the daemon's own list on the local node).
  static std::string DeviceList(const std::string& node, const std::vector<int>& indices) {
    const std::vector<std::string> visible =
        node == "local" ? VisibleGpuIds() : std::vector<std::string>();
    std::string list;
    for (int i : indices) {
      const std::string id = static_cast<size_t>(i) < visible.size()
                                 ? visible[static_cast<size_t>(i)]
                                 : std::to_string(i);
      list += (list.empty() ? "" : ",") + id;
    }
    return list;
  }

  // The cores a worker on `node` runs on: whole CPUs asked get cores of their own (recorded in
  // `held` for a restarted daemon); a fraction shares the cores no one holds. None: unpinned.
  std::vector<int> CoresFor(const JobRecord& job, const std::string& node, json* held) {
    if (!cores_.Has(node)) return {};
    const int64_t millis = job.spec.per_worker.cpu_millis;
    if (millis < 1000 || millis % 1000 != 0) return cores_.Unheld(node);
    std::vector<int> mine = cores_.Take(node, millis / 1000, job.spec.id);
    for (int c : mine) (*held)[node].push_back(c);
    return mine;
  }

  Result<json> LaunchFile(const JobRecord& job, const std::vector<std::string>& nodes,
                          const std::string& dir) {
    json launch = {{"workdir", job.workdir}, {"poll_ms", 100}, {"workers", json::array()}};
    launch["memory_bytes"] = job.spec.per_worker.memory_bytes * static_cast<int64_t>(nodes.size());
    std::vector<std::string> argv = job.command;
    REEL_ASSIGN_OR_RETURN(argv[0], ResolveProgram(argv[0], reel_binary_));
    const int port = FreePort();
    launch["gpus"] = json::object();
    launch["cores"] = json::object();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::vector<int> gpus = gpus_.Take(nodes[i], job.spec.per_worker.gpu, job.spec.id);
      for (int g : gpus) launch["gpus"][nodes[i]].push_back(g);
      const std::vector<int> cpus = CoresFor(job, nodes[i], &launch["cores"]);
      std::vector<std::string> env = {"CUDA_VISIBLE_DEVICES=" + DeviceList(nodes[i], gpus),
                                      "RANK=" + std::to_string(i),
                                      "WORLD_SIZE=" + std::to_string(nodes.size()),
                                      "LOCAL_RANK=" + std::to_string(i),
                                      "LOCAL_WORLD_SIZE=" + std::to_string(nodes.size()),
                                      "MASTER_ADDR=127.0.0.1",
                                      "MASTER_PORT=" + std::to_string(port),
                                      "REEL_JOB_ID=" + job.spec.id,
                                      "REEL_NODE=" + nodes[i]};
      for (const auto& [k, v] : job.env) env.push_back(k + "=" + v);
      launch["workers"].push_back({{"argv", argv},
                                   {"env", CurrentEnvironment(env)},
                                   {"cpus", cpus},
                                   {"log", dir + "/worker-" + std::to_string(i) + ".log"}});
    }
    return launch;
  }

  std::string reel_binary_;
  Pool gpus_;   // per node, GPU indices
  Pool cores_;  // per node, the machine's cores it pins
};

}  // namespace

std::unique_ptr<JobRunner> MakeLocalJobRunner(std::string reel_binary,
                                              const std::vector<Node>& nodes,
                                              const CoreMap& cores) {
  return std::make_unique<LocalJobRunner>(std::move(reel_binary), nodes, cores);
}

}  // namespace reel::sched::internal
