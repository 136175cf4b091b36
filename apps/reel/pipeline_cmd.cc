// reel pipeline run|retry|ls|status|logs — pipelines of tasks as DAGs on this machine.
//
//   reel pipeline run FILE [--input NAME=VALUE]... [--no-cache] [--cpus N] [--memory Q]
//                          [--scheduler auto|URL]   (tasks as the scheduler's jobs)
//                          [--executor k8s --image I [--kubeconfig F] [--namespace N]]
//                                                   (tasks as Kubernetes Jobs)
//   reel pipeline retry RUN        what failed or never ran, and what depends on it
//   reel pipeline ls               runs, newest first
//   reel pipeline status RUN       its tasks
//   reel pipeline logs RUN [TASK]  their output (RUN may be "latest"; a cached task shows the
//                                  log of the run it reused)
//
// The state folder (--state, REEL_PIPELINE_STATE, default ./reel-data/pipelines) keeps runs,
// logs and outputs. `run` and `retry` print each task's changes as they happen and exit 0 when
// the run succeeded; otherwise 1 after a line naming the failed task and its log, with the log's
// last lines.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "apps/reel/commands.h"
#include "apps/reel/models_print.h"
#include "apps/reel/scheduler_client.h"
#include "base/quantity.h"
#include "sched/executor.h"
#include "sched/runner.h"

namespace reel::cli {
// Named, not anonymous: the unity build puts this file beside the other commands.
namespace pipeline_cmd {

using sched::RunRecord;
using sched::RunState;
using sched::TaskRecord;
using sched::TaskState;

struct Flags {
  std::string state = "./reel-data/pipelines";
  std::string file, run, task;
  std::vector<std::string> inputs;
  bool no_cache = false, json = false;
  double cpus = 0;
  std::string memory;
  std::string scheduler;  // "": this machine; "auto": the state folder's daemon; else its URL
  std::string scheduler_state = "./reel-data/scheduler";
  std::string executor = "local";                                        // or "k8s"
  std::string image, kubeconfig, k8s_namespace, k8s_queue, poll = "2s";  // --executor k8s
  size_t limit = 20;
};

constexpr std::string_view kPipeline = "reel pipeline";
constexpr size_t kLogTailLines = 20;

std::string Seconds(int64_t ms) {
  char text[32];
  if (ms < 60000) {
    std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(ms) / 1000);
    return text;
  }
  return FormatDuration(std::chrono::milliseconds(ms / 1000 * 1000));
}

std::string Timestamp(int64_t unix_ms) {
  return FormatIso8601Utc(std::chrono::system_clock::time_point(std::chrono::milliseconds(unix_ms)))
      .substr(0, 19);
}

Result<std::unique_ptr<sched::RunStore>> OpenStore(const Flags& f) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(f.state, error);
  if (error) return InvalidArgumentError("--state " + f.state + ": " + error.message());
  return sched::RunStore::Open(absolute.lexically_normal().string());
}

Result<sched::Resources> Capacity(const Flags& f) {
  // On the scheduler or the cluster the tasks wait in its queues: the runner starts every ready
  // one.
  if (!f.scheduler.empty() || f.executor == "k8s")
    return sched::Resources{int64_t{1} << 50, int64_t{1} << 62, 1 << 20};
  sched::Resources capacity = sched::MachineCapacity();
  if (f.cpus > 0) capacity.cpu_millis = static_cast<int64_t>(f.cpus * 1000);
  if (!f.memory.empty()) {
    REEL_ASSIGN_OR_RETURN(capacity.memory_bytes, ParseMemoryBytes(f.memory));
  }
  return capacity;
}

Result<std::unique_ptr<sched::Executor>> MakeK8sExecutor(const Flags& f) {
  if (f.image.empty()) return InvalidArgumentError("--executor k8s needs --image");
  sched::K8sExecutorOptions o;
  o.image = f.image;
  o.kubectl.kubeconfig = f.kubeconfig;
  o.kubectl.k8s_namespace = f.k8s_namespace;
  o.kueue_queue = f.k8s_queue;
  REEL_ASSIGN_OR_RETURN(o.poll, ParseDuration(f.poll));
  return sched::MakeK8sExecutor(std::move(o));
}

// This machine's processes, the scheduler's jobs (--scheduler) or a cluster's (--executor k8s).
Result<std::unique_ptr<sched::Executor>> MakeExecutor(const Flags& f) {
  if (f.executor == "k8s") return MakeK8sExecutor(f);
  if (f.executor != "local") {
    return InvalidArgumentError("--executor must be local or k8s, got '" + f.executor + "'");
  }
  if (f.scheduler.empty()) return sched::MakeLocalExecutor();
  const char* state = std::getenv("REEL_SCHEDULER_STATE");
  REEL_ASSIGN_OR_RETURN(std::string url,
                        SchedulerUrl(f.scheduler == "auto" ? "" : f.scheduler,
                                     state != nullptr ? state : f.scheduler_state));
  return sched::MakeSchedulerExecutor(url);
}

// One line per change of a task, as it happens.
class Progress {
 public:
  explicit Progress(const sched::Pipeline& p) : start_(std::chrono::steady_clock::now()) {
    for (const sched::Task& t : p.tasks) {
      width_ = std::max(width_, t.name.size());
      tasks_[t.name] = &t;
    }
  }

  void OnTask(const TaskRecord& t) {
    const double at =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string detail;
    const sched::Task& task = *tasks_.at(t.name);
    switch (t.state) {
      case TaskState::kRunning:
        detail = ResourcesText(task.resources);
        if (t.attempts > 1) {
          detail +=
              ", attempt " + std::to_string(t.attempts) + " of " + std::to_string(task.retries + 1);
        }
        break;
      case TaskState::kCached:
        detail = "reused from " + t.cached_from;
        break;
      case TaskState::kSucceeded:
        detail = Seconds(t.finished_ms - t.started_ms);
        break;
      default:
        detail = t.reason;
    }
    std::printf("[%7.1fs] %-*s %-9s %s\n", at, static_cast<int>(width_), t.name.c_str(),
                std::string(TaskStateName(t.state)).c_str(), detail.c_str());
    std::fflush(stdout);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  size_t width_ = 4;
  std::map<std::string, const sched::Task*> tasks_;
};

void PrintLogTail(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const size_t from = lines.size() > kLogTailLines ? lines.size() - kLogTailLines : 0;
  for (size_t i = from; i < lines.size(); ++i) std::fprintf(stderr, "  | %s\n", lines[i].c_str());
}

// The closing lines of `run` and `retry`; the exit code.
int Report(sched::RunStore& store, const RunRecord& run) {
  Result<std::vector<TaskRecord>> tasks = store.GetTasks(run.id);
  if (!tasks.ok()) return Fail(kPipeline, tasks.status());
  std::map<TaskState, int> counts;
  const TaskRecord* failed = nullptr;
  for (const TaskRecord& t : *tasks) {
    ++counts[t.state];
    if (t.name == run.failed_task) failed = &t;
  }
  std::printf("run %s %s in %s: %d succeeded, %d cached, %d failed, %d skipped\n", run.id.c_str(),
              std::string(RunStateName(run.state)).c_str(),
              Seconds(run.finished_ms - run.created_ms).c_str(), counts[TaskState::kSucceeded],
              counts[TaskState::kCached], counts[TaskState::kFailed], counts[TaskState::kSkipped]);
  for (const TaskRecord& t : *tasks) {
    for (const auto& [name, uri] : t.outputs) {
      if (IsDone(t.state)) std::printf("  %s.%s: %s\n", t.name.c_str(), name.c_str(), uri.c_str());
    }
  }
  std::fflush(stdout);
  if (run.state == RunState::kSucceeded) return 0;
  if (failed == nullptr) return Fail(kPipeline, InternalError("run " + run.id + " failed"));
  std::fprintf(stderr,
               "reel pipeline: run %s failed: task '%s' %s after %d attempt%s; its log: %s\n",
               run.id.c_str(), failed->name.c_str(), failed->reason.c_str(), failed->attempts,
               failed->attempts == 1 ? "" : "s", failed->log.c_str());
  PrintLogTail(failed->log);
  std::fprintf(stderr, "reel pipeline: rerun what failed with: reel pipeline retry %s\n",
               run.id.c_str());
  return 1;
}

sched::RunnerOptions RunnerOptionsFor(const Flags& f, Progress* progress,
                                      const sched::Resources& capacity) {
  sched::RunnerOptions options;
  options.capacity = capacity;
  options.use_cache = !f.no_cache;
  options.gpu_ids = sched::VisibleGpuIds();
  options.on_task = [progress](const RunRecord&, const TaskRecord& t) { progress->OnTask(t); };
  options.on_message = [](const std::string& m) {
    std::printf("reel pipeline: %s\n", m.c_str());
    std::fflush(stdout);
  };
  return options;
}

int RunRun(const Flags& f) {
  Result<std::map<std::string, std::string>> inputs = ParseKeyValues("--input", f.inputs);
  if (!inputs.ok()) return Fail(kPipeline, inputs.status());
  Result<sched::Pipeline> pipeline = sched::LoadPipeline(f.file, *inputs);
  if (!pipeline.ok()) return Fail(kPipeline, pipeline.status());
  Result<sched::Resources> capacity = Capacity(f);
  if (!capacity.ok()) return Fail(kPipeline, capacity.status());
  Result<std::unique_ptr<sched::RunStore>> store = OpenStore(f);
  if (!store.ok()) return Fail(kPipeline, store.status());
  Result<std::unique_ptr<sched::Executor>> executor = MakeExecutor(f);
  if (!executor.ok()) return Fail(kPipeline, executor.status());
  const std::string where = f.executor == "k8s" ? "as Kubernetes Jobs"
                            : f.scheduler.empty()
                                ? "up to " + sched::ResourcesText(*capacity) + " at once"
                                : "as jobs of the scheduler";
  std::printf("pipeline %s: %zu tasks, %s; state in %s\n", pipeline->name.c_str(),
              pipeline->tasks.size(), where.c_str(), (*store)->state_dir().c_str());
  Progress progress(*pipeline);
  Result<RunRecord> run =
      sched::RunPipeline(*pipeline, **store, **executor, RunnerOptionsFor(f, &progress, *capacity));
  if (!run.ok()) return Fail(kPipeline, run.status());
  return Report(**store, *run);
}

int RunRetry(const Flags& f) {
  Result<sched::Resources> capacity = Capacity(f);
  if (!capacity.ok()) return Fail(kPipeline, capacity.status());
  Result<std::unique_ptr<sched::RunStore>> store = OpenStore(f);
  if (!store.ok()) return Fail(kPipeline, store.status());
  Result<RunRecord> record = (*store)->GetRun(f.run);
  if (!record.ok()) return Fail(kPipeline, record.status());
  Result<sched::Pipeline> pipeline =
      sched::ParsePipeline(record->source, record->source_name, record->inputs);
  if (!pipeline.ok()) return Fail(kPipeline, pipeline.status());
  std::printf("retrying run %s of pipeline %s\n", f.run.c_str(), pipeline->name.c_str());
  Progress progress(*pipeline);
  Result<std::unique_ptr<sched::Executor>> executor = MakeExecutor(f);
  if (!executor.ok()) return Fail(kPipeline, executor.status());
  Result<RunRecord> run =
      sched::RetryRun(f.run, **store, **executor, RunnerOptionsFor(f, &progress, *capacity));
  if (!run.ok()) return Fail(kPipeline, run.status());
  return Report(**store, *run);
}

nlohmann::json TaskJson(const TaskRecord& t) {
  nlohmann::json j = {{"name", t.name},
                      {"state", std::string(TaskStateName(t.state))},
                      {"attempts", t.attempts},
                      {"reason", t.reason},
                      {"cache_key", t.cache_key},
                      {"cached_from", t.cached_from},
                      {"outputs", t.outputs},
                      {"log", t.log},
                      {"started_ms", t.started_ms},
                      {"finished_ms", t.finished_ms}};
  j["exit_code"] = t.exit_code ? nlohmann::json(*t.exit_code) : nlohmann::json();
  return j;
}

nlohmann::json RunJson(const RunRecord& r) {
  return {{"id", r.id},
          {"pipeline", r.pipeline},
          {"file", r.source_name},
          {"inputs", r.inputs},
          {"workdir", r.workdir},
          {"state", std::string(RunStateName(r.state))},
          {"failed_task", r.failed_task},
          {"created_ms", r.created_ms},
          {"finished_ms", r.finished_ms}};
}

int RunLs(const Flags& f) {
  Result<std::unique_ptr<sched::RunStore>> store = OpenStore(f);
  if (!store.ok()) return Fail(kPipeline, store.status());
  Result<std::vector<RunRecord>> runs = (*store)->ListRuns(f.limit);
  if (!runs.ok()) return Fail(kPipeline, runs.status());
  if (f.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const RunRecord& r : *runs) j.push_back(RunJson(r));
    return PrintJson(j);
  }
  std::printf("%-24s %-11s %-19s %9s  %s\n", "RUN", "STATE", "STARTED (UTC)", "TOOK",
              "FAILED TASK");
  for (const RunRecord& r : *runs) {
    const std::string took = r.finished_ms > 0 ? Seconds(r.finished_ms - r.created_ms) : "-";
    std::printf("%-24s %-11s %-19s %9s  %s\n", r.id.c_str(),
                std::string(RunStateName(r.state)).c_str(), Timestamp(r.created_ms).c_str(),
                took.c_str(), r.failed_task.c_str());
  }
  return 0;
}

int RunStatus(const Flags& f) {
  Result<std::unique_ptr<sched::RunStore>> store = OpenStore(f);
  if (!store.ok()) return Fail(kPipeline, store.status());
  Result<RunRecord> run = (*store)->GetRun(f.run);
  if (!run.ok()) return Fail(kPipeline, run.status());
  Result<std::vector<TaskRecord>> tasks = (*store)->GetTasks(f.run);
  if (!tasks.ok()) return Fail(kPipeline, tasks.status());
  if (f.json) {
    nlohmann::json j = RunJson(*run);
    j["tasks"] = nlohmann::json::array();
    for (const TaskRecord& t : *tasks) j["tasks"].push_back(TaskJson(t));
    return PrintJson(j);
  }
  std::printf("run %s: %s (%s), started %s UTC\n", run->id.c_str(),
              std::string(RunStateName(run->state)).c_str(), run->source_name.c_str(),
              Timestamp(run->created_ms).c_str());
  std::printf("%-20s %-10s %8s %5s %8s  %s\n", "TASK", "STATE", "ATTEMPTS", "EXIT", "TOOK",
              "DETAIL");
  for (const TaskRecord& t : *tasks) {
    const std::string exit = t.exit_code ? std::to_string(*t.exit_code) : "-";
    const std::string took =
        t.finished_ms > 0 && t.started_ms > 0 ? Seconds(t.finished_ms - t.started_ms) : "-";
    std::string detail = t.state == TaskState::kCached ? "reused from " + t.cached_from : t.reason;
    for (const auto& [name, uri] : t.outputs) {
      detail += (detail.empty() ? "" : "; ") + name + "=" + uri;
    }
    std::printf("%-20s %-10s %8d %5s %8s  %s\n", t.name.c_str(),
                std::string(TaskStateName(t.state)).c_str(), t.attempts, exit.c_str(), took.c_str(),
                detail.c_str());
  }
  return 0;
}

// RUN, or the newest run for "latest".
Result<std::string> RunId(sched::RunStore& store, const std::string& run) {
  if (run != "latest") return run;
  REEL_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store.ListRuns(1));
  if (runs.empty()) return NotFoundError("no pipeline runs yet in " + store.state_dir());
  return runs[0].id;
}

int RunLogs(const Flags& f) {
  Result<std::unique_ptr<sched::RunStore>> store = OpenStore(f);
  if (!store.ok()) return Fail(kPipeline, store.status());
  Result<std::string> run = RunId(**store, f.run);
  if (!run.ok()) return Fail(kPipeline, run.status());
  Result<std::vector<TaskRecord>> tasks = (*store)->GetTasks(*run);
  if (!tasks.ok()) return Fail(kPipeline, tasks.status());
  if (tasks->empty()) {
    return Fail(kPipeline, NotFoundError("no pipeline run '" + *run + "' (reel pipeline ls)"));
  }
  bool found = false;
  for (const TaskRecord& t : *tasks) {
    if (!f.task.empty() && t.name != f.task) continue;
    found = true;
    // A cached task did not run in this run: its output is the log of the run it reused.
    const std::string log =
        t.state == TaskState::kCached ? (*store)->LogPath(t.cached_from, t.name) : t.log;
    if (f.task.empty()) std::printf("==> %s (%s) <==\n", t.name.c_str(), log.c_str());
    std::ifstream in(log, std::ios::binary);
    if (in) std::fputs(std::string(std::istreambuf_iterator<char>(in), {}).c_str(), stdout);
  }
  if (!found) {
    return Fail(kPipeline, NotFoundError("run " + *run + " has no task '" + f.task + "'"));
  }
  return 0;
}

void AddRunFlags(CLI::App* cmd, Flags* f) {
  cmd->add_flag("--no-cache", f->no_cache, "run every task, even one an earlier run has done");
  cmd->add_option("--cpus", f->cpus, "CPUs the tasks may use at once (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory", f->memory, "memory the tasks may use at once (default: all)");
  cmd->add_option("--scheduler", f->scheduler,
                  "run the tasks as jobs of the scheduler: its URL, or auto (the daemon of "
                  "REEL_SCHEDULER_STATE, started if needed)");
  cmd->add_option("--executor", f->executor, "local (default) or k8s: each task a Kubernetes Job");
  cmd->add_option("--image", f->image, "k8s: the container image the tasks run in");
  cmd->add_option("--kubeconfig", f->kubeconfig, "k8s: the cluster (default: kubectl's)");
  cmd->add_option("--namespace", f->k8s_namespace, "k8s: the namespace");
  cmd->add_option("--k8s-queue", f->k8s_queue, "k8s: Kueue's LocalQueue for the tasks' Jobs");
  cmd->add_option("--poll", f->poll, "k8s: how often to look at the running Jobs (default 2s)");
}

}  // namespace pipeline_cmd

void RegisterPipeline(CLI::App& app, int* exit_code) {
  using namespace pipeline_cmd;  // NOLINT(google-build-using-namespace): this file's own helpers
  static pipeline_cmd::Flags f;
  CLI::App* pipeline = app.add_subcommand("pipeline", "run pipelines of tasks as DAGs");
  pipeline->require_subcommand(1);
  pipeline->fallthrough();
  pipeline->add_option("--state", f.state, "runs, logs and outputs (default ./reel-data/pipelines)")
      ->envname("REEL_PIPELINE_STATE");
  pipeline->add_flag("--json", f.json, "print JSON instead of tables");
  CLI::App* run = pipeline->add_subcommand("run", "run a pipeline file");
  run->add_option("file", f.file, "the pipeline's YAML")->required();
  run->add_option("--input", f.inputs, "NAME=VALUE for one of the file's inputs (repeatable)");
  AddRunFlags(run, &f);
  run->callback([exit_code] { *exit_code = RunRun(f); });
  CLI::App* retry = pipeline->add_subcommand("retry", "rerun what failed in a run, and after");
  retry->add_option("run", f.run, "the run's id (reel pipeline ls)")->required();
  AddRunFlags(retry, &f);
  retry->callback([exit_code] { *exit_code = RunRetry(f); });
  CLI::App* ls = pipeline->add_subcommand("ls", "runs, newest first");
  ls->add_option("--limit", f.limit, "at most this many (default 20)")->check(CLI::PositiveNumber);
  ls->callback([exit_code] { *exit_code = RunLs(f); });
  CLI::App* status = pipeline->add_subcommand("status", "a run's tasks");
  status->add_option("run", f.run, "the run's id")->required();
  status->callback([exit_code] { *exit_code = RunStatus(f); });
  CLI::App* logs = pipeline->add_subcommand("logs", "a run's output, or one task's");
  logs->add_option("run", f.run, "the run's id, or latest")->required();
  logs->add_option("task", f.task, "only this task");
  logs->callback([exit_code] { *exit_code = RunLogs(f); });
}

}  // namespace reel::cli
