#include "sched/run_store.h"

#include <nlohmann/json.hpp>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "base/json.h"
#include "base/subprocess.h"
#include "sched/schema.h"

namespace reel::sched {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTaskStates[] = {"pending", "running", "retrying", "succeeded",
                                            "cached",  "failed",  "skipped"};
constexpr std::string_view kRunStates[] = {"running", "succeeded", "failed", "interrupted"};

std::string MapToJson(const std::map<std::string, std::string>& map) {
  return nlohmann::json(map).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::map<std::string, std::string>> MapFromJson(const std::string& text) {
  REEL_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, "a pipeline record"));
  std::map<std::string, std::string> map;
  if (!doc.is_object()) return DataLossError("a pipeline record holds a malformed map");
  for (const auto& [key, value] : doc.items()) {
    if (!value.is_string()) return DataLossError("a pipeline record holds a malformed map");
    map[key] = value.get<std::string>();
  }
  return map;
}

template <size_t N>
Result<size_t> StateIndex(const std::string_view (&names)[N], const std::string& text) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == text) return i;
  }
  return DataLossError("a pipeline record holds an unknown state '" + text + "'");
}

constexpr std::string_view kRunColumns =
    "id, pipeline, source_name, source, inputs, workdir, state, failed_task, runner_pid, "
    "created_ms, finished_ms, ttl_ms, scratch_removed";

Result<RunRecord> RunFromRow(db::Row& row) {
  RunRecord r;
  r.id = row.TakeText(0);
  r.pipeline = row.TakeText(1);
  r.source_name = row.TakeText(2);
  r.source = row.TakeText(3);
  REEL_ASSIGN_OR_RETURN(r.inputs, MapFromJson(row.Text(4)));
  r.workdir = row.TakeText(5);
  REEL_ASSIGN_OR_RETURN(const size_t state, StateIndex(kRunStates, row.Text(6)));
  r.state = static_cast<RunState>(state);
  r.failed_task = row.TakeText(7);
  r.runner_pid = row.Int(8);
  r.created_ms = row.Int(9);
  r.finished_ms = row.Int(10);
  r.ttl_ms = row.Int(11);
  r.scratch_removed = row.Int(12) != 0;
  // A runner killed (kill -9, a lost machine) leaves its run "running": say what it is.
  if (r.state == RunState::kRunning && !ProcessRunning(r.runner_pid)) {
    r.state = RunState::kInterrupted;
  }
  return r;
}

}  // namespace

std::string_view TaskStateName(TaskState state) { return kTaskStates[static_cast<int>(state)]; }
std::string_view RunStateName(RunState state) { return kRunStates[static_cast<int>(state)]; }
bool IsDone(TaskState state) {
  return state == TaskState::kSucceeded || state == TaskState::kCached;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<std::unique_ptr<RunStore>> RunStore::Open(const std::string& state_dir) {
  std::error_code error;
  fs::create_directories(state_dir, error);
  if (error) {
    return UnavailableError("pipeline state folder " + state_dir + ": " + error.message());
  }
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<db::Database> db, db::OpenSqlite(state_dir + "/state.db"));
  REEL_RETURN_IF_ERROR(db::Migrate(*db, "sched", internal::SchedMigrations()));
  return std::unique_ptr<RunStore>(new RunStore(state_dir, std::move(db)));
}

std::string RunStore::LogPath(const std::string& run, const std::string& task) const {
  return state_dir_ + "/logs/" + run + "/" + task + ".log";
}

std::string RunStore::ArtifactsDir(const std::string& run) const {
  return state_dir_ + "/artifacts/" + run;
}

std::string RunStore::ScratchDir(const std::string& run, const std::string& task) const {
  return state_dir_ + "/scratch/" + run + "/" + task;
}

Result<std::string> RunStore::CreateRun(RunRecord run, const std::vector<std::string>& tasks) {
  REEL_RETURN_IF_ERROR(db_->Transact([&]() -> Status {
    REEL_ASSIGN_OR_RETURN(
        std::vector<db::Row> rows,
        db_->Query("SELECT MAX(seq) FROM sched_runs WHERE pipeline = ?", {run.pipeline}));
    const int64_t seq = rows.empty() || rows[0].IsNull(0) ? 1 : rows[0].Int(0) + 1;
    run.id = run.pipeline + "-" + std::to_string(seq);
    REEL_RETURN_IF_ERROR(
        db_->Exec("INSERT INTO sched_runs (id, pipeline, seq, source_name, source, inputs, "
                  "workdir, state, failed_task, runner_pid, created_ms, finished_ms, ttl_ms, "
                  "scratch_removed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                  {run.id, run.pipeline, seq, run.source_name, run.source, MapToJson(run.inputs),
                   run.workdir, std::string(RunStateName(run.state)), run.failed_task,
                   run.runner_pid, run.created_ms, run.finished_ms, run.ttl_ms})
            .status());
    for (size_t i = 0; i < tasks.size(); ++i) {
      REEL_RETURN_IF_ERROR(
          db_->Exec("INSERT INTO sched_tasks (run_id, name, position, state, attempts, reason, "
                    "cache_key, cached_from, outputs, log, started_ms, finished_ms) VALUES "
                    "(?, ?, ?, 'pending', 0, '', '', '', '{}', ?, 0, 0)",
                    {run.id, tasks[i], static_cast<int64_t>(i), LogPath(run.id, tasks[i])})
              .status());
    }
    return Status::Ok();
  }));
  return run.id;
}

Status RunStore::UpdateRun(const RunRecord& run) {
  return db_
      ->Exec(
          "UPDATE sched_runs SET state = ?, failed_task = ?, runner_pid = ?, finished_ms = ?, "
          "ttl_ms = ?, scratch_removed = ? WHERE id = ?",
          {std::string(RunStateName(run.state)), run.failed_task, run.runner_pid, run.finished_ms,
           run.ttl_ms, int64_t{run.scratch_removed ? 1 : 0}, run.id})
      .status();
}

Status RunStore::UpdateTask(const std::string& run, const TaskRecord& t) {
  const db::Value exit_code =
      t.exit_code ? db::Value(int64_t{*t.exit_code}) : db::Value(std::monostate());
  return db_
      ->Exec(
          "UPDATE sched_tasks SET state = ?, attempts = ?, exit_code = ?, reason = ?, "
          "cache_key = ?, cached_from = ?, outputs = ?, log = ?, started_ms = ?, "
          "finished_ms = ? WHERE run_id = ? AND name = ?",
          {std::string(TaskStateName(t.state)), int64_t{t.attempts}, exit_code, t.reason,
           t.cache_key, t.cached_from, MapToJson(t.outputs), t.log, t.started_ms, t.finished_ms,
           run, t.name})
      .status();
}

Result<RunRecord> RunStore::GetRun(const std::string& id) {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db_->Query("SELECT " + std::string(kRunColumns) + " FROM sched_runs WHERE id = ?", {id}));
  if (rows.empty()) return NotFoundError("no pipeline run '" + id + "' (reel pipeline ls)");
  return RunFromRow(rows[0]);
}

Result<std::vector<TaskRecord>> RunStore::GetTasks(const std::string& run) {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db_->Query("SELECT name, state, attempts, exit_code, reason, cache_key, cached_from, "
                 "outputs, log, started_ms, finished_ms FROM sched_tasks WHERE run_id = ? "
                 "ORDER BY position",
                 {run}));
  std::vector<TaskRecord> tasks;
  for (db::Row& row : rows) {
    TaskRecord t;
    t.name = row.TakeText(0);
    REEL_ASSIGN_OR_RETURN(const size_t state, StateIndex(kTaskStates, row.Text(1)));
    t.state = static_cast<TaskState>(state);
    t.attempts = static_cast<int>(row.Int(2));
    if (!row.IsNull(3)) t.exit_code = static_cast<int>(row.Int(3));
    t.reason = row.TakeText(4);
    t.cache_key = row.TakeText(5);
    t.cached_from = row.TakeText(6);
    REEL_ASSIGN_OR_RETURN(t.outputs, MapFromJson(row.Text(7)));
    t.log = row.TakeText(8);
    t.started_ms = row.Int(9);
    t.finished_ms = row.Int(10);
    tasks.push_back(std::move(t));
  }
  return tasks;
}

Result<std::vector<RunRecord>> RunStore::ListRuns(size_t limit) {
  REEL_ASSIGN_OR_RETURN(std::vector<db::Row> rows,
                        db_->Query("SELECT " + std::string(kRunColumns) +
                                       " FROM sched_runs ORDER BY created_ms DESC, id DESC "
                                       "LIMIT ?",
                                   {static_cast<int64_t>(limit)}));
  std::vector<RunRecord> runs;
  for (db::Row& row : rows) {
    REEL_ASSIGN_OR_RETURN(RunRecord r, RunFromRow(row));
    runs.push_back(std::move(r));
  }
  return runs;
}

Result<std::optional<CacheEntry>> RunStore::LookupCache(const std::string& key) {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db_->Query("SELECT run_id, task, outputs FROM sched_cache WHERE cache_key = ?", {key}));
  if (rows.empty()) return std::optional<CacheEntry>();
  CacheEntry e;
  e.key = key;
  e.run_id = rows[0].TakeText(0);
  e.task = rows[0].TakeText(1);
  REEL_ASSIGN_OR_RETURN(e.outputs, MapFromJson(rows[0].Text(2)));
  return std::optional<CacheEntry>(std::move(e));
}

Status RunStore::PutCache(const CacheEntry& e) {
  return db_->Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(
        db_->Exec("DELETE FROM sched_cache WHERE cache_key = ?", {e.key}).status());
    return db_
        ->Exec(
            "INSERT INTO sched_cache (cache_key, run_id, task, outputs, created_ms) VALUES "
            "(?, ?, ?, ?, ?)",
            {e.key, e.run_id, e.task, MapToJson(e.outputs), NowUnixMs()})
        .status();
  });
}

Status RunStore::SweepScratch(int64_t now_ms) {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db_->Query("SELECT id FROM sched_runs WHERE scratch_removed = 0 AND finished_ms > 0 AND "
                 "finished_ms + ttl_ms <= ?",
                 {now_ms}));
  for (db::Row& row : rows) {
    const std::string id = row.TakeText(0);
    std::error_code error;
    fs::remove_all(state_dir_ + "/scratch/" + id, error);
    if (error) {
      return UnavailableError("removing the scratch space of run " + id + ": " + error.message());
    }
    REEL_RETURN_IF_ERROR(
        db_->Exec("UPDATE sched_runs SET scratch_removed = 1 WHERE id = ?", {id}).status());
  }
  return Status::Ok();
}

}  // namespace reel::sched
