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

class LocalJobRunner : public JobRunner {
 public:
  LocalJobRunner(std::string reel_binary, const std::vector<Node>& nodes)
      : reel_binary_(std::move(reel_binary)) {
    for (const Node& n : nodes) gpus_[n.name].assign(static_cast<size_t>(n.capacity.gpu), "");
  }

  Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) override {
    Result<int64_t> shim = Spawn(job, nodes, dir);
    if (!shim.ok()) ReleaseGpus(job.spec.id);  // it never ran: nothing will report its end
    return shim;
  }

  void Signal(const JobRecord& job, int signal) override {
    if (job.shim_pid > 0) kill(-static_cast<pid_t>(job.shim_pid), signal);
  }

  void Adopt(const JobRecord& job, const std::string& dir) override {
    Result<std::string> text = ReadFileToString(dir + "/launch.json", "job launch file");
    Result<json> launch = text.ok() ? ParseJson(*text, "launch.json") : Result<json>(text.status());
    if (!launch.ok() || !launch->contains("gpus")) return;
    for (const auto& [node, indices] : (*launch)["gpus"].items()) {
      for (const json& i : indices) Hold(node, i.get<int>(), job.spec.id);
    }
  }

  std::optional<JobEnd> Poll(const JobRecord& job, const std::string& dir) override {
    std::optional<JobEnd> end = Ended(job, dir);
    if (end) ReleaseGpus(job.spec.id);
    return end;
  }

 private:
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
    if (!ProcessRunning(job.shim_pid))
      return JobEnd{-1, SIGKILL, "its supervisor ended without a report"};
    return std::nullopt;
  }

  void Hold(const std::string& node, int index, const std::string& job) {
    auto it = gpus_.find(node);
    if (it != gpus_.end() && index >= 0 && static_cast<size_t>(index) < it->second.size()) {
      it->second[static_cast<size_t>(index)] = job;
    }
  }

  void ReleaseGpus(const std::string& job) {
    for (auto& [node, holders] : gpus_) {
      for (std::string& holder : holders) {
        if (holder == job) holder.clear();
      }
    }
  }

  // `count` free GPU indices of `node` for `job`, taken; fewer when the node has fewer free (the
  // scheduler's counts make that a bug elsewhere, so the worker simply gets what is there).
  std::vector<int> TakeGpus(const std::string& node, int64_t count, const std::string& job) {
    std::vector<int> taken;
    auto it = gpus_.find(node);
    if (it == gpus_.end()) return taken;
    for (size_t i = 0; i < it->second.size() && static_cast<int64_t>(taken.size()) < count; ++i) {
      if (!it->second[i].empty()) continue;
      it->second[i] = job;
      taken.push_back(static_cast<int>(i));
    }
    return taken;
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

  Result<json> LaunchFile(const JobRecord& job, const std::vector<std::string>& nodes,
                          const std::string& dir) {
    json launch = {{"workdir", job.workdir}, {"poll_ms", 100}, {"workers", json::array()}};
    launch["memory_bytes"] = job.spec.per_worker.memory_bytes * static_cast<int64_t>(nodes.size());
    std::vector<std::string> argv = job.command;
    REEL_ASSIGN_OR_RETURN(argv[0], ResolveProgram(argv[0], reel_binary_));
    const int port = FreePort();
    launch["gpus"] = json::object();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::vector<int> gpus = TakeGpus(nodes[i], job.spec.per_worker.gpu, job.spec.id);
      for (int g : gpus) launch["gpus"][nodes[i]].push_back(g);
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
                                   {"log", dir + "/worker-" + std::to_string(i) + ".log"}});
    }
    return launch;
  }

  std::string reel_binary_;
  std::map<std::string, std::vector<std::string>> gpus_;  // node -> each GPU's job ("" free)
};

}  // namespace

std::unique_ptr<JobRunner> MakeLocalJobRunner(std::string reel_binary,
                                              const std::vector<Node>& nodes) {
  return std::make_unique<LocalJobRunner>(std::move(reel_binary), nodes);
}

}  // namespace reel::sched::internal
