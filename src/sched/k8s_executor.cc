// Pipeline tasks as Kubernetes Jobs: each task's objects written by k8s_job.h (the writer
// `reel jobs submit --executor k8s` uses), applied and followed through kubectl.h.
#include <nlohmann/json.hpp>
#include <signal.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/subprocess.h"
#include "sched/executor.h"
#include "sched/jobs.h"
#include "sched/k8s_job.h"
#include "sched/kubectl.h"

namespace reel::sched {
namespace {

using nlohmann::json;

// A DNS-1035 label from the run and task ("train/PIPE-3" -> "pipe-3-train").
std::string JobName(const std::string& run, const std::string& task) {
  std::string name;
  for (char c : run + "-" + task) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (ok) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!ok && !name.empty() && name.back() != '-') name += '-';
  }
  if (name.empty() || std::isalpha(static_cast<unsigned char>(name[0])) == 0) name = "t-" + name;
  name = name.substr(0, 63);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

// What the runner added to this machine's environment, minus what names this machine's paths
// (the pod has its own scratch, binary and GPUs).
json PodEnv(const std::vector<std::string>& env, std::string* run) {
  std::set<std::string> own;
  for (const std::string& e : CurrentEnvironment()) own.insert(e);
  json out = json::object();
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos || own.count(e) != 0) continue;
    const std::string name = e.substr(0, eq);
    if (name == "REEL_BIN" || name == "REEL_SCRATCH" || name == "CUDA_VISIBLE_DEVICES") continue;
    if (name == "REEL_RUN_ID") *run = e.substr(eq + 1);
    out[name] = e.substr(eq + 1);
  }
  return out;
}

class K8sExecutor : public Executor {
 public:
  explicit K8sExecutor(K8sExecutorOptions o) : o_(std::move(o)) {
    if (o_.clock == nullptr) o_.clock = Clock::System();
  }

  Result<int64_t> Start(const Launch& launch) override {
    std::string run;
    json body = {{"env", PodEnv(launch.env, &run)},
                 {"resources", ResourcesToJson(launch.resources)}};
    std::vector<std::string> argv = launch.argv;
    // The runner resolved the program on this machine; the image's PATH finds it there.
    argv[0] = std::filesystem::path(argv[0]).filename().string();
    body["command"] = argv;
    REEL_ASSIGN_OR_RETURN(JobRecord job, JobFromJson(body));
    K8sJobOptions k;
    k.name = JobName(run, launch.task);
    k.image = o_.image;
    k.k8s_namespace = o_.kubectl.k8s_namespace;
    k.kueue_queue = o_.kueue_queue;
    k.priority_class = o_.priority_class;
    REEL_ASSIGN_OR_RETURN(std::string yaml, EmitJobK8s(job, k));
    REEL_ASSIGN_OR_RETURN(std::string applied, ApplyK8s(yaml, o_.kubectl));
    std::ofstream(launch.log_path, std::ios::app) << applied;
    const int64_t id = next_++;
    jobs_[id] = Task{k.name, launch.log_path, false};
    return id;
  }

  void Terminate(int64_t id, std::chrono::milliseconds grace) override {
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    Result<std::string> deleted = DeleteK8sJob(it->second.name, grace, o_.kubectl);
    std::ofstream(it->second.log, std::ios::app)
        << (deleted.ok() ? *deleted : std::string(deleted.status().message()) + "\n");
    it->second.terminated = true;
  }

  std::optional<Exit> Wait(Clock::TimePoint deadline) override {
    while (!jobs_.empty()) {
      for (auto& [id, task] : jobs_) {
        if (std::optional<Exit> exit = Ended(id, task)) {
          jobs_.erase(id);
          return exit;
        }
      }
      if (o_.clock->Now() >= deadline) return std::nullopt;
      o_.clock->SleepFor(std::min<Clock::Duration>(o_.poll, deadline - o_.clock->Now()));
    }
    return std::nullopt;
  }

  size_t running() const override { return jobs_.size(); }

 private:
  struct Task {
    std::string name, log;
    bool terminated = false;  // deleted at the runner's request
  };

  // Its exit once the Job has ended (or was deleted, or vanished), with its state in the log.
  std::optional<Exit> Ended(int64_t id, const Task& task) {
    if (task.terminated) return Exit{id, -1, SIGTERM};
    Result<K8sJobState> state = GetK8sJobState(task.name, o_.kubectl);
    std::ofstream log(task.log, std::ios::app);
    if (!state.ok()) {
      if (state.status().code() != StatusCode::kNotFound) return std::nullopt;  // try again
      log << "job/" << task.name << " is gone from the cluster\n";
      return Exit{id, -1, SIGKILL};
    }
    if (state->Describe() != last_[id])
      log << "job/" << task.name << " " << state->Describe() << "\n";
    last_[id] = state->Describe();
    if (!state->done()) return std::nullopt;
    last_.erase(id);
    return Exit{id, state->phase == "succeeded" ? 0 : 1, 0};
  }

  K8sExecutorOptions o_;
  std::map<int64_t, Task> jobs_;
  std::map<int64_t, std::string> last_;  // each job's last state, logged when it changes
  int64_t next_ = 1;
};

}  // namespace

std::unique_ptr<Executor> MakeK8sExecutor(K8sExecutorOptions options) {
  return std::make_unique<K8sExecutor>(std::move(options));
}

}  // namespace reel::sched
