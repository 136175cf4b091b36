#include "sched/runner.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/files.h"
#include "base/hash.h"
#include "base/quantity.h"
#include "base/subprocess.h"
#include "base/thread_pool.h"
#include "sched/runner_internal.h"

namespace reel::sched {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A task of the run being executed.
struct Live {
  const Task* task = nullptr;
  TaskRecord rec;
  std::optional<int64_t> process;            // while running
  Clock::TimePoint retry_at{};               // while retrying
  std::optional<Clock::TimePoint> deadline;  // its timeout, while running
  bool timed_out = false;
  std::vector<int64_t> gpus;  // indices given to it, while running
};

bool IsLocalUri(const std::string& uri) { return uri.find("://") == std::string::npos; }

class Execution {
 public:
  Execution(const Pipeline& pipeline, RunStore& store, Executor& executor,
            const RunnerOptions& options, RunRecord run, std::vector<TaskRecord> records)
      : p_(pipeline), store_(store), executor_(executor), o_(options), run_(std::move(run)) {
    for (size_t i = 0; i < p_.tasks.size(); ++i) {
      Live live;
      live.task = &p_.tasks[i];
      live.rec = std::move(records[i]);
      live_.push_back(std::move(live));
      index_[p_.tasks[i].name] = i;
    }
    free_ = o_.capacity;
    for (int64_t g = 0; g < o_.capacity.gpu; ++g) free_gpus_.insert(g);
  }

  Result<RunRecord> Execute() {
    REEL_ASSIGN_OR_RETURN(order_, TopologicalOrder(p_.tasks));
    while (true) {
      REEL_RETURN_IF_ERROR(StartReady());
      if (executor_.running() == 0 && !AnyRetrying()) break;
      std::optional<Exit> exit = executor_.Wait(NextDeadline());
      if (exit) {
        REEL_RETURN_IF_ERROR(OnExit(*exit));
      } else {
        REEL_RETURN_IF_ERROR(OnDeadlines());
      }
    }
    return Finish();
  }

 private:
  bool AnyRetrying() const {
    return std::any_of(live_.begin(), live_.end(),
                       [](const Live& l) { return l.rec.state == TaskState::kRetrying; });
  }

  Clock::TimePoint NextDeadline() const {
    Clock::TimePoint next = Clock::TimePoint::max();
    for (const Live& l : live_) {
      if (l.rec.state == TaskState::kRetrying) next = std::min(next, l.retry_at);
      if (l.deadline) next = std::min(next, *l.deadline);
    }
    return next;
  }

  bool Ready(const Live& l) const {
    if (l.rec.state != TaskState::kPending) return false;
    return std::all_of(l.task->depends_on.begin(), l.task->depends_on.end(),
                       [&](const std::string& d) { return IsDone(live_[index_.at(d)].rec.state); });
  }

  // Starts, in topological order, every ready task the free resources allow; a cache hit
  // completes at once, which may make more tasks ready, so the scan repeats until nothing moves.
  Status StartReady() {
    bool moved = true;
    while (moved && !stopping_) {
      moved = false;
      for (size_t i : order_) {
        Live& l = live_[i];
        if (!Ready(l)) continue;
        REEL_ASSIGN_OR_RETURN(const bool started, TryStart(l));
        moved |= started && IsDone(l.rec.state);
        if (stopping_) break;
      }
    }
    return Status::Ok();
  }

  // Returns whether the task left "pending".
  Result<bool> TryStart(Live& l) {
    if (l.rec.cache_key.empty()) {
      Result<std::string> program = internal::ResolveProgram(l.task->command[0], o_.reel_binary);
      if (!program.ok()) {
        REEL_RETURN_IF_ERROR(FailForGood(l, std::string(program.status().message())));
        return true;
      }
      REEL_ASSIGN_OR_RETURN(l.rec.cache_key, KeyOf(l, *program));
      REEL_ASSIGN_OR_RETURN(const bool hit, TryCache(l));
      if (hit) return true;
    }
    if (!l.task->resources.FitsIn(free_)) return false;
    REEL_RETURN_IF_ERROR(Launch(l));
    return true;
  }

  Result<std::string> KeyOf(const Live& l, const std::string& program) const {
    std::map<std::string, std::string> dep_keys;
    for (const std::string& d : l.task->depends_on) dep_keys[d] = live_[index_.at(d)].rec.cache_key;
    REEL_ASSIGN_OR_RETURN(std::string key, internal::TaskKey(*l.task, p_, run_.inputs, dep_keys,
                                                             program, run_.workdir));
    // A task that is never cached gives its dependents a key of this run only: its outputs
    // differ from run to run, so theirs must not be reused either.
    if (!l.task->cache) key = Sha256Hex(key + " run " + run_.id);
    return key;
  }

  Result<bool> TryCache(Live& l) {
    if (!o_.use_cache || !l.task->cache) return false;
    REEL_ASSIGN_OR_RETURN(std::optional<CacheEntry> entry, store_.LookupCache(l.rec.cache_key));
    if (!entry || entry->run_id == run_.id) return false;
    for (const std::string& out : l.task->outputs) {
      const auto it = entry->outputs.find(out);
      if (it == entry->outputs.end()) return false;
      std::error_code error;
      if (IsLocalUri(it->second) && !fs::exists(it->second, error)) return false;
    }
    l.rec.state = TaskState::kCached;
    l.rec.cached_from = entry->run_id;
    l.rec.outputs = entry->outputs;
    l.rec.started_ms = l.rec.finished_ms = NowUnixMs();
    REEL_RETURN_IF_ERROR(Record(l));
    return true;
  }

  std::map<std::string, std::string> OutputsOf(const Task& task) const {
    const std::string root =
        p_.artifacts.empty() ? store_.ArtifactsDir(run_.id) : p_.artifacts + "/" + run_.id;
    std::map<std::string, std::string> outputs;
    for (const std::string& out : task.outputs) outputs[out] = root + "/" + task.name + "/" + out;
    return outputs;
  }

  // The task's command and environment additions with every template filled in.
  Result<sched::Launch> LaunchFor(const Live& l) const {
    std::map<std::string, std::map<std::string, std::string>> dep_outputs;
    for (const std::string& d : l.task->depends_on)
      dep_outputs[d] = live_[index_.at(d)].rec.outputs;
    TemplateValues values;
    values.inputs = &run_.inputs;
    values.task_outputs = &dep_outputs;
    values.own_outputs = l.rec.outputs;
    values.run_id = run_.id;
    std::vector<std::string> argv;
    for (const std::string& arg : l.task->command) {
      REEL_ASSIGN_OR_RETURN(std::string rendered, Render(arg, *l.task, p_, values));
      argv.push_back(std::move(rendered));
    }
    REEL_ASSIGN_OR_RETURN(argv[0], internal::ResolveProgram(argv[0], o_.reel_binary));
    REEL_ASSIGN_OR_RETURN(std::string reel, internal::ResolveProgram("reel", o_.reel_binary));
    std::vector<std::string> env = {"REEL_RUN_ID=" + run_.id, "REEL_TASK=" + l.task->name,
                                    "REEL_SCRATCH=" + store_.ScratchDir(run_.id, l.task->name),
                                    "REEL_BIN=" + reel};
    for (const auto& [name, value] : l.task->env) {
      REEL_ASSIGN_OR_RETURN(std::string rendered, Render(value, *l.task, p_, values));
      env.push_back(name + "=" + rendered);
    }
    return sched::Launch{l.task->name, std::move(argv), std::move(env),
                         run_.workdir, l.rec.log,       l.task->resources};
  }

  std::string GpuList(const std::vector<int64_t>& gpus) const {
    std::string list;
    for (int64_t g : gpus) {
      const std::string id = static_cast<size_t>(g) < o_.gpu_ids.size()
                                 ? o_.gpu_ids[static_cast<size_t>(g)]
                                 : std::to_string(g);
      list += (list.empty() ? "" : ",") + id;
    }
    return list;
  }

  Status PrepareFolders(const Live& l) const {
    std::error_code error;
    for (const auto& [name, uri] : l.rec.outputs) {
      if (IsLocalUri(uri)) fs::create_directories(fs::path(uri).parent_path(), error);
    }
    fs::create_directories(store_.ScratchDir(run_.id, l.task->name), error);
    fs::create_directories(fs::path(l.rec.log).parent_path(), error);
    if (error) return UnavailableError("task " + l.task->name + ": " + error.message());
    std::ofstream log(l.rec.log, std::ios::app);
    log << "=== reel pipeline: " << run_.id << " task " << l.task->name << " attempt "
        << l.rec.attempts << " ===\n";
    return Status::Ok();
  }

  Status Launch(Live& l) {
    ++l.rec.attempts;
    l.rec.outputs = OutputsOf(*l.task);
    l.rec.log = store_.LogPath(run_.id, l.task->name);
    REEL_RETURN_IF_ERROR(PrepareFolders(l));
    REEL_ASSIGN_OR_RETURN(sched::Launch launch, LaunchFor(l));
    for (int64_t g = 0; g < l.task->resources.gpu; ++g) {
      l.gpus.push_back(*free_gpus_.begin());
      free_gpus_.erase(free_gpus_.begin());
    }
    if (o_.capacity.gpu > 0) launch.env.push_back("CUDA_VISIBLE_DEVICES=" + GpuList(l.gpus));
    launch.env = CurrentEnvironment(launch.env);
    Result<int64_t> process = executor_.Start(launch);
    if (!process.ok()) {
      ReleaseGpus(l);
      return FailForGood(l, std::string(process.status().message()));
    }
    free_ -= l.task->resources;
    l.process = *process;
    l.timed_out = false;
    if (l.task->timeout) l.deadline = o_.clock->Now() + *l.task->timeout;
    l.rec.state = TaskState::kRunning;
    l.rec.exit_code.reset();
    l.rec.reason.clear();
    l.rec.started_ms = NowUnixMs();
    l.rec.finished_ms = 0;
    return Record(l);
  }

  void ReleaseGpus(Live& l) {
    free_gpus_.insert(l.gpus.begin(), l.gpus.end());
    l.gpus.clear();
  }

  Status OnExit(const Exit& exit) {
    const auto it = std::find_if(live_.begin(), live_.end(),
                                 [&](const Live& l) { return l.process && *l.process == exit.id; });
    if (it == live_.end()) return Status::Ok();  // not ours
    Live& l = *it;
    l.process.reset();
    l.deadline.reset();
    free_ += l.task->resources;
    ReleaseGpus(l);
    l.rec.exit_code = exit.exit_code;
    l.rec.finished_ms = NowUnixMs();
    if (exit.ok() && !l.timed_out) return Succeed(l);
    const std::string why =
        l.timed_out ? "timed out after " + FormatDuration(*l.task->timeout) : ExitText(exit);
    if (l.rec.attempts > l.task->retries || stopping_) return FailForGood(l, why);
    l.rec.state = TaskState::kRetrying;
    const milliseconds pause = l.task->BackoffAfter(l.rec.attempts);
    l.retry_at = o_.clock->Now() + pause;
    l.rec.reason = why + "; attempt " + std::to_string(l.rec.attempts + 1) + " of " +
                   std::to_string(l.task->retries + 1) + " in " + FormatDuration(pause);
    return Record(l);
  }

  Status Succeed(Live& l) {
    l.rec.state = TaskState::kSucceeded;
    l.rec.reason.clear();
    REEL_RETURN_IF_ERROR(Record(l));
    if (!l.task->cache) return Status::Ok();
    return store_.PutCache(CacheEntry{l.rec.cache_key, run_.id, l.task->name, l.rec.outputs});
  }

  Status FailForGood(Live& l, std::string why) {
    l.rec.state = TaskState::kFailed;
    l.rec.reason = std::move(why);
    if (l.rec.finished_ms == 0) l.rec.finished_ms = NowUnixMs();
    if (run_.failed_task.empty()) run_.failed_task = l.task->name;
    stopping_ = true;
    // Nothing new starts now: tasks waiting to be retried end with their last failure.
    for (Live& other : live_) {
      if (other.rec.state != TaskState::kRetrying) continue;
      other.rec.state = TaskState::kFailed;
      other.rec.reason = other.rec.reason.substr(0, other.rec.reason.find(';')) +
                         "; not retried: task " + run_.failed_task + " failed";
      REEL_RETURN_IF_ERROR(Record(other));
    }
    return Record(l);
  }

  Status OnDeadlines() {
    const Clock::TimePoint now = o_.clock->Now();
    for (Live& l : live_) {
      if (l.rec.state == TaskState::kRetrying && l.retry_at <= now) {
        l.rec.state = TaskState::kPending;
      }
      if (l.deadline && *l.deadline <= now && l.process) {
        l.timed_out = true;
        l.deadline.reset();
        executor_.Terminate(*l.process, o_.kill_grace);
      }
    }
    return Status::Ok();
  }

  Result<RunRecord> Finish() {
    for (Live& l : live_) {
      if (l.rec.state != TaskState::kPending) continue;
      l.rec.state = TaskState::kSkipped;
      l.rec.reason = SkipReason(l);
      REEL_RETURN_IF_ERROR(Record(l));
    }
    run_.state = run_.failed_task.empty() ? RunState::kSucceeded : RunState::kFailed;
    run_.finished_ms = NowUnixMs();
    run_.ttl_ms = p_.ttl_after_finished.count();
    REEL_RETURN_IF_ERROR(store_.UpdateRun(run_));
    REEL_RETURN_IF_ERROR(store_.SweepScratch(NowUnixMs()));
    const Hook& hook = run_.state == RunState::kSucceeded ? p_.on_success : p_.on_failure;
    if (!hook.empty() && o_.on_message) {
      const std::string name = run_.state == RunState::kSucceeded ? "on_success" : "on_failure";
      const Status s = internal::RunHook(
          hook, run_, store_.state_dir() + "/logs/" + run_.id + "/" + name + ".log");
      o_.on_message(s.ok() ? name + " hook done" : name + " hook: " + std::string(s.message()));
    } else if (!hook.empty()) {
      internal::RunHook(hook, run_, store_.state_dir() + "/logs/" + run_.id + "/hook.log")
          .IgnoreError();  // no one to tell: the run's own state is what the caller reports
    }
    return run_;
  }

  std::string SkipReason(const Live& l) const {
    for (const std::string& d : l.task->depends_on) {
      const TaskState s = live_[index_.at(d)].rec.state;
      if (s == TaskState::kFailed || s == TaskState::kSkipped) {
        return "upstream task " + d + " " + std::string(TaskStateName(s));
      }
    }
    return "not started: task " + run_.failed_task + " failed";
  }

  Status Record(const Live& l) {
    REEL_RETURN_IF_ERROR(store_.UpdateTask(run_.id, l.rec));
    if (o_.on_task) o_.on_task(run_, l.rec);
    return Status::Ok();
  }

  const Pipeline& p_;
  RunStore& store_;
  Executor& executor_;
  const RunnerOptions& o_;
  RunRecord run_;
  std::vector<Live> live_;
  std::map<std::string, size_t> index_;
  std::vector<size_t> order_;
  Resources free_;
  std::set<int64_t> free_gpus_;
  bool stopping_ = false;
};

// Before a run is recorded: a task that can never fit would wait forever.
Status CheckCapacity(const Pipeline& p, const Resources& capacity) {
  for (const Task& t : p.tasks) {
    if (t.resources.FitsIn(capacity)) continue;
    return InvalidArgumentError(t.where + ": task '" + t.name + "' asks for " +
                                ResourcesText(t.resources) + " but at most " +
                                ResourcesText(capacity) + " is available");
  }
  return Status::Ok();
}

std::string WorkdirOr(const std::string& workdir) {
  if (!workdir.empty()) return workdir;
  std::error_code error;
  return fs::current_path(error).string();
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

Resources MachineCapacity() {
  Resources r;
  r.cpu_millis = static_cast<int64_t>(HardwareThreads()) * 1000;
  // Whole MiB, so that it prints exactly and briefly ("24105Mi").
  r.memory_bytes = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE) /
                   (1 << 20) * (1 << 20);
  r.gpu = static_cast<int64_t>(VisibleGpuIds().size());
  return r;
}

std::vector<std::string> VisibleGpuIds() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> ids;
  if (visible == nullptr) return ids;
  std::string_view rest = visible;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (comma != 0) ids.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return ids;
}

Result<RunRecord> RunPipeline(const Pipeline& pipeline, RunStore& store, Executor& executor,
                              const RunnerOptions& options) {
  REEL_RETURN_IF_ERROR(CheckCapacity(pipeline, options.capacity));
  REEL_RETURN_IF_ERROR(store.SweepScratch(NowUnixMs()));
  RunRecord run;
  run.pipeline = pipeline.name;
  run.source_name = pipeline.source_name;
  run.source = pipeline.source;
  run.inputs = pipeline.inputs;
  run.workdir = WorkdirOr(options.workdir);
  run.runner_pid = ::getpid();
  run.created_ms = NowUnixMs();
  std::vector<std::string> names;
  for (const Task& t : pipeline.tasks) names.push_back(t.name);
  REEL_ASSIGN_OR_RETURN(run.id, store.CreateRun(run, names));
  REEL_ASSIGN_OR_RETURN(std::vector<TaskRecord> records, store.GetTasks(run.id));
  Execution execution(pipeline, store, executor, options, std::move(run), std::move(records));
  return execution.Execute();
}

Result<RunRecord> RetryRun(const std::string& run_id, RunStore& store, Executor& executor,
                           const RunnerOptions& options) {
  REEL_ASSIGN_OR_RETURN(RunRecord run, store.GetRun(run_id));
  if (run.state == RunState::kSucceeded || run.state == RunState::kRunning) {
    return FailedPreconditionError("run " + run_id + " is " + std::string(RunStateName(run.state)) +
                                   ": only a failed or interrupted run is retried");
  }
  REEL_ASSIGN_OR_RETURN(Pipeline pipeline, ParsePipeline(run.source, run.source_name, run.inputs));
  REEL_RETURN_IF_ERROR(CheckCapacity(pipeline, options.capacity));
  REEL_ASSIGN_OR_RETURN(std::vector<TaskRecord> records, store.GetTasks(run.id));
  if (records.size() != pipeline.tasks.size()) {
    return DataLossError("run " + run_id + " records " + std::to_string(records.size()) +
                         " tasks but its pipeline has " + std::to_string(pipeline.tasks.size()));
  }
  for (TaskRecord& r : records) {
    if (IsDone(r.state)) continue;
    const std::string name = r.name, log = r.log;
    r = TaskRecord{};
    r.name = name;
    r.log = log;
    REEL_RETURN_IF_ERROR(store.UpdateTask(run.id, r));
  }
  run.state = RunState::kRunning;
  run.failed_task.clear();
  run.runner_pid = ::getpid();
  run.finished_ms = 0;
  REEL_RETURN_IF_ERROR(store.UpdateRun(run));
  Execution execution(pipeline, store, executor, options, std::move(run), std::move(records));
  return execution.Execute();
}

}  // namespace reel::sched
