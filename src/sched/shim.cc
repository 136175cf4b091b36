#include "sched/shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "base/files.h"
#include "base/json.h"
#include "base/quantity.h"
#include "base/stop_request.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "sched/cgroup.h"

namespace reel::sched {
namespace {

using nlohmann::json;

struct Worker {
  pid_t pid = -1;
  bool running = false;
  int exit_code = 0;
  int signal = 0;
};

// Every process of this session but the shim: the workers and whatever they started.
std::vector<pid_t> SessionProcesses() {
  std::vector<pid_t> pids;
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (pid <= 0 || pid == self) continue;
    if (getsid(pid) == self) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

int64_t ResidentBytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

void SignalSession(int sig) {
  for (pid_t pid : SessionProcesses()) kill(pid, sig);
}

// `cgroup_procs`: the job's cgroup, which each worker joins before exec.
Status StartWorkers(const json& launch, const std::vector<std::string>& cgroup_procs,
                    std::vector<Worker>* workers) {
  const std::string workdir = launch.value("workdir", "");
  for (const json& w : launch.at("workers")) {
    const std::string log = w.at("log").get<std::string>();
    UniqueFd fd(open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!fd.valid()) return NotFoundError("worker log " + log + ": " + std::strerror(errno));
    SpawnOptions options;
    options.stdout_fd = fd.get();
    options.stderr_fd = fd.get();
    options.workdir = workdir;
    options.cgroup_procs = cgroup_procs;
    options.cpus = w.value("cpus", std::vector<int>());
    REEL_ASSIGN_OR_RETURN(const pid_t pid,
                          SpawnProcess(w.at("argv").get<std::vector<std::string>>(),
                                       w.at("env").get<std::vector<std::string>>(), options));
    workers->push_back(Worker{pid, true, 0, 0});
  }
  return Status::Ok();
}

// Reaps exited workers; returns whether one failed (not 0, not preempted).
bool Reap(std::vector<Worker>& workers) {
  bool failed = false;
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (Worker& w : workers) {
      if (w.pid != pid) continue;
      w.running = false;
      const ProcessEnd end = DecodeWaitStatus(status);
      w.exit_code = end.exit_code;
      w.signal = end.signal;
      failed |= w.exit_code != 0 && w.exit_code != kExitPreempted;
    }
  }
  return failed;
}

json Outcome(const std::vector<Worker>& workers, const std::string& memory_reason) {
  json out = {{"exit_code", 0}, {"signal", 0}, {"reason", ""}, {"workers", json::array()}};
  bool all_preempted = !workers.empty();
  for (const Worker& w : workers) {
    out["workers"].push_back({{"exit_code", w.exit_code}, {"signal", w.signal}});
    all_preempted &= w.exit_code == kExitPreempted;
    if ((w.exit_code != 0 && w.exit_code != kExitPreempted) && out["exit_code"] == 0) {
      out["exit_code"] = w.exit_code;
      out["signal"] = w.signal;
    }
  }
  if (all_preempted) out["exit_code"] = kExitPreempted;
  if (!memory_reason.empty()) {
    out["exit_code"] = -1;
    out["signal"] = SIGKILL;
    out["reason"] = memory_reason;
  }
  return out;
}

// Holds the job to its memory: a cgroup of its own where the machine allows one (the kernel
// kills past the limit; the workers join it before exec and their children inherit it; the shim
// stays out, so that the kernel never picks it), else the resident memory of every process of
// the session summed each poll (Slurm's OverMemoryKill).
class MemoryGuard {
 public:
  MemoryGuard(const std::string& dir, int64_t limit) : limit_(limit) {
    if (limit_ <= 0) return;
    const std::string name = dir.substr(dir.find_last_of('/') + 1) + "-" + std::to_string(getpid());
    Result<std::unique_ptr<JobCgroup>> group = JobCgroup::Create(name, {limit_, ""});
    if (group.ok()) group_ = std::move(*group);
    if (!group.ok()) std::fprintf(stderr, "reel job shim: %s\n", group.status().ToString().c_str());
  }

  // Whether the job went over its memory just now (then reason() says how).
  bool Check() {
    if (limit_ <= 0 || !reason_.empty()) return false;
    if (group_) {
      if (!group_->OomKilled()) return false;
      reason_ = "over its memory: " + FormatMemory(group_->PeakBytes() / (1 << 20) * (1 << 20)) +
                " at its peak, " + FormatMemory(limit_) + " requested (killed by the kernel, " +
                group_->kind() + ")";
      return true;
    }
    int64_t rss = 0;
    for (pid_t pid : SessionProcesses()) rss += ResidentBytes(pid);
    if (rss <= limit_) return false;
    reason_ = "over its memory: " + FormatMemory(rss / (1 << 20) * (1 << 20)) + " resident, " +
              FormatMemory(limit_) + " requested";
    return true;
  }
  const std::string& reason() const { return reason_; }
  std::vector<std::string> cgroup_procs() const {
    return group_ ? group_->ProcsFiles() : std::vector<std::string>();
  }
  std::string kind() const { return limit_ <= 0 ? "none" : group_ ? group_->kind() : "polling"; }

 private:
  int64_t limit_;
  std::unique_ptr<JobCgroup> group_;
  std::string reason_;
};

void IgnoreTerm(int) {}

}  // namespace

int RunShim(const std::string& dir) {
  // SIGTERM to the session is for the workers; the shim waits to record how they end. (A
  // handler, not SIG_IGN: ignored signals would stay ignored in the workers across exec.)
  struct sigaction action {};
  action.sa_handler = IgnoreTerm;
  sigaction(SIGTERM, &action, nullptr);
  Result<std::string> text = ReadFileToString(dir + "/launch.json", "job launch file");
  if (!text.ok()) {
    std::fprintf(stderr, "reel job shim: %s\n", text.status().ToString().c_str());
    return 1;
  }
  Result<json> launch = ParseJson(*text, dir + "/launch.json");
  std::vector<Worker> workers;
  Status started = launch.status();
  int64_t memory = 0;
  int poll_ms = 100;
  if (launch.ok()) {
    try {  // nlohmann's exceptions stop here: a malformed launch file fails the job
      memory = launch->value("memory_bytes", int64_t{0});
      poll_ms = launch->value("poll_ms", 100);
    } catch (const json::exception& e) {
      started = InvalidArgumentError(dir + "/launch.json: " + e.what());
    }
  }
  MemoryGuard guard(dir, memory);  // before the workers start, so that they start in its cgroup
  if (started.ok()) {
    try {
      started = StartWorkers(*launch, guard.cgroup_procs(), &workers);
    } catch (const json::exception& e) {
      started = InvalidArgumentError(dir + "/launch.json: " + e.what());
    }
  }
  bool stopping = !started.ok();
  if (!started.ok()) SignalSession(SIGKILL);
  while (std::any_of(workers.begin(), workers.end(), [](const Worker& w) { return w.running; })) {
    if (Reap(workers) && !stopping) {
      SignalSession(SIGTERM);  // a gang lives and dies together
      stopping = true;
    }
    if (guard.Check()) SignalSession(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  // Whatever the workers left running in the session ends with the job.
  SignalSession(SIGKILL);
  guard.Check();  // the kernel may have killed the last worker for its memory
  json outcome = Outcome(workers, guard.reason());
  outcome["memory_enforcement"] = guard.kind();
  if (!started.ok()) {
    outcome["exit_code"] = 127;
    outcome["reason"] = std::string(started.message());
  }
  const Status written = WriteFileAtomically(dir + "/exit.json", outcome.dump());
  if (!written.ok()) {
    std::fprintf(stderr, "reel job shim: %s\n", written.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace reel::sched
