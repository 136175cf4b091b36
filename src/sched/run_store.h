// Where pipeline runs are kept: a state folder holding an SQLite database (WAL: `reel pipeline ls`
// reads while a run writes) with runs, their tasks and the step cache, and beside it each run's
// logs/, artifacts/ and scratch/:
//   STATE/state.db
//   STATE/logs/RUN/TASK.log
//   STATE/artifacts/RUN/TASK/OUTPUT     (outputs, unless the pipeline names an artifacts URI)
//   STATE/scratch/RUN/TASK/             ($REEL_SCRATCH; removed once the run's TTL has passed)
// Errors: Unavailable when the database cannot be opened or written; NotFound for an unknown run.
// Thread-safety: one RunStore is one connection: use it from one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "db/database.h"

namespace reel::sched {

enum class TaskState { kPending, kRunning, kRetrying, kSucceeded, kCached, kFailed, kSkipped };
enum class RunState { kRunning, kSucceeded, kFailed, kInterrupted };

std::string_view TaskStateName(TaskState state);
std::string_view RunStateName(RunState state);
bool IsDone(TaskState state);  // succeeded or cached: its outputs can be used

struct TaskRecord {
  std::string name;
  TaskState state = TaskState::kPending;
  int attempts = 0;
  std::optional<int> exit_code;
  std::string reason;       // why it failed or was skipped; "" otherwise
  std::string cache_key;    // "" until known
  std::string cached_from;  // the run whose outputs a cached task reuses
  std::map<std::string, std::string> outputs;
  std::string log;
  int64_t started_ms = 0, finished_ms = 0;  // Unix time; 0 when not yet
};

struct RunRecord {
  std::string id;  // PIPELINE-N
  std::string pipeline;
  std::string source_name, source;  // the pipeline file's name and text
  std::map<std::string, std::string> inputs;
  std::string workdir;  // where tasks run
  RunState state = RunState::kRunning;
  std::string failed_task;
  int64_t runner_pid = 0;
  int64_t created_ms = 0, finished_ms = 0;
  int64_t ttl_ms = 0;
  bool scratch_removed = false;
};

struct CacheEntry {
  std::string key, run_id, task;
  std::map<std::string, std::string> outputs;
};

class RunStore {
 public:
  // Opens (creating) the state folder and its database.
  static Result<std::unique_ptr<RunStore>> Open(const std::string& state_dir);

  const std::string& state_dir() const { return state_dir_; }
  std::string LogPath(const std::string& run, const std::string& task) const;
  std::string ArtifactsDir(const std::string& run) const;
  std::string ScratchDir(const std::string& run, const std::string& task) const;

  // Records a new run, numbering it PIPELINE-N, and its tasks (all pending); returns the id.
  Result<std::string> CreateRun(RunRecord run, const std::vector<std::string>& tasks);
  Status UpdateRun(const RunRecord& run);
  Status UpdateTask(const std::string& run, const TaskRecord& task);

  // A run; a "running" run whose runner process is gone reads as interrupted.
  Result<RunRecord> GetRun(const std::string& id);
  Result<std::vector<TaskRecord>> GetTasks(const std::string& run);  // in the pipeline's order
  Result<std::vector<RunRecord>> ListRuns(size_t limit);             // newest first

  Result<std::optional<CacheEntry>> LookupCache(const std::string& key);
  Status PutCache(const CacheEntry& entry);

  // Removes the scratch folders of finished runs whose TTL has passed (at `now_ms`).
  Status SweepScratch(int64_t now_ms);

 private:
  RunStore(std::string state_dir, std::unique_ptr<db::Database> db)
      : state_dir_(std::move(state_dir)), db_(std::move(db)) {}
  std::string state_dir_;
  std::unique_ptr<db::Database> db_;
};

// Unix time in milliseconds.
int64_t NowUnixMs();

}  // namespace reel::sched
