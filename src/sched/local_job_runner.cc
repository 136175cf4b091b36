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

#include "base/files.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "sched/job_runner.h"
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

// Alive and not a zombie waiting for its parent (init, once the daemon that started it is gone).
bool Alive(int64_t pid) {
  if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || line.substr(paren + 2, 1) != "Z";
}

class LocalJobRunner : public JobRunner {
 public:
  explicit LocalJobRunner(std::string reel_binary) : reel_binary_(std::move(reel_binary)) {}

  Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) override {
    std::error_code error;
    std::filesystem::remove(dir + "/exit.json", error);
    REEL_ASSIGN_OR_RETURN(json launch, LaunchFile(job, nodes, dir));
    REEL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/launch.json", launch.dump()));
    REEL_ASSIGN_OR_RETURN(std::string reel, ResolveProgram("reel", reel_binary_));
    SpawnOptions options;
    options.die_with_parent = false;  // it outlives a daemon killed with -9
    REEL_ASSIGN_OR_RETURN(const pid_t shim,
                          SpawnProcess({reel, "jobs", "shim", dir}, CurrentEnvironment(), options));
    return static_cast<int64_t>(shim);
  }

  void Signal(const JobRecord& job, int signal) override {
    if (job.shim_pid > 0) kill(-static_cast<pid_t>(job.shim_pid), signal);
  }

  std::optional<JobEnd> Poll(const JobRecord& job, const std::string& dir) override {
    const std::string exit_file = dir + "/exit.json";
    std::error_code error;
    if (std::filesystem::exists(exit_file, error)) {
      Result<std::string> text = ReadFileToString(exit_file, "job exit file");
      Result<json> exit = text.ok() ? ParseJson(*text, exit_file) : Result<json>(text.status());
      if (!exit.ok() || !exit->is_object()) return JobEnd{-1, 0, "unreadable exit file"};
      return JobEnd{exit->value("exit_code", -1), exit->value("signal", 0),
                    exit->value("reason", std::string())};
    }
    if (!Alive(job.shim_pid)) return JobEnd{-1, SIGKILL, "its supervisor ended without a report"};
    return std::nullopt;
  }

 private:
  Result<json> LaunchFile(const JobRecord& job, const std::vector<std::string>& nodes,
                          const std::string& dir) const {
    json launch = {{"workdir", job.workdir}, {"poll_ms", 100}, {"workers", json::array()}};
    launch["memory_bytes"] = job.spec.per_worker.memory_bytes * static_cast<int64_t>(nodes.size());
    std::vector<std::string> argv = job.command;
    REEL_ASSIGN_OR_RETURN(argv[0], ResolveProgram(argv[0], reel_binary_));
    const int port = FreePort();
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<std::string> env = {
          "RANK=" + std::to_string(i),       "WORLD_SIZE=" + std::to_string(nodes.size()),
          "LOCAL_RANK=" + std::to_string(i), "LOCAL_WORLD_SIZE=" + std::to_string(nodes.size()),
          "MASTER_ADDR=127.0.0.1",           "MASTER_PORT=" + std::to_string(port),
          "REEL_JOB_ID=" + job.spec.id,      "REEL_NODE=" + nodes[i]};
      for (const auto& [k, v] : job.env) env.push_back(k + "=" + v);
      launch["workers"].push_back({{"argv", argv},
                                   {"env", CurrentEnvironment(env)},
                                   {"log", dir + "/worker-" + std::to_string(i) + ".log"}});
    }
    return launch;
  }

  std::string reel_binary_;
};

}  // namespace

std::unique_ptr<JobRunner> MakeLocalJobRunner(std::string reel_binary) {
  return std::make_unique<LocalJobRunner>(std::move(reel_binary));
}

}  // namespace reel::sched::internal
