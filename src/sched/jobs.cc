#include "sched/jobs.h"

#include <filesystem>

#include "base/json.h"
#include "base/quantity.h"
#include "base/strings.h"
#include "sched/schema.h"

namespace reel::sched {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Status Bad(const std::string& field, const std::string& what) {
  return InvalidArgumentError("job field '" + field + "': " + what);
}

// A string field, or a number written as one ("cpu": 2 and "cpu": "2" both work).
Result<std::string> Text(const json& j, const std::string& field) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number()) return j.dump();
  return Bad(field, "expected a string or a number");
}

Result<std::map<std::string, std::string>> StringMap(const json& j, const std::string& field) {
  std::map<std::string, std::string> out;
  if (j.is_null()) return out;
  if (!j.is_object()) return Bad(field, "expected an object of strings");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) return Bad(field + "." + k, "expected a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

Status ReadResources(const json& r, JobSpec* spec) {
  if (r.is_null()) return Status::Ok();
  if (!r.is_object()) return Bad("resources", "expected an object with cpu, memory, gpu");
  for (const auto& [k, v] : r.items()) {
    if (k != "cpu" && k != "memory" && k != "gpu") return Bad("resources." + k, "unknown key");
  }
  if (r.contains("cpu")) {
    REEL_ASSIGN_OR_RETURN(std::string text, Text(r["cpu"], "resources.cpu"));
    Result<int64_t> m = ParseCpuMillicores(text);
    if (!m.ok()) return Bad("resources.cpu", std::string(m.status().message()));
    spec->per_worker.cpu_millis = *m;
  }
  if (r.contains("memory")) {
    REEL_ASSIGN_OR_RETURN(std::string text, Text(r["memory"], "resources.memory"));
    Result<int64_t> b = ParseMemoryBytes(text);
    if (!b.ok()) return Bad("resources.memory", std::string(b.status().message()));
    spec->per_worker.memory_bytes = *b;
  }
  if (r.contains("gpu")) {
    if (!r["gpu"].is_number_integer() || r["gpu"].get<int64_t>() < 0) {
      return Bad("resources.gpu", "expected a whole number >= 0");
    }
    spec->per_worker.gpu = r["gpu"].get<int64_t>();
  }
  return Status::Ok();
}

Result<int> Int(const json& j, int fallback, int lo, int hi, const std::string& field) {
  if (j.is_null()) return fallback;
  if (!j.is_number_integer()) return Bad(field, "expected a whole number");
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) {
    return Bad(field, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
  }
  return static_cast<int>(v);
}

const json& Field(const json& j, const char* key) {
  static const json kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

}  // namespace

Result<JobRecord> JobFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgumentError("a job is a JSON object");
  static const char* const kKeys[] = {"name",
                                      "command",
                                      "workers",
                                      "max_workers",
                                      "resources",
                                      "queue",
                                      "priority",
                                      "spot",
                                      "time_limit",
                                      "node_selector",
                                      "env",
                                      "workdir",
                                      "ttl_after_finished"};
  for (const auto& [k, v] : j.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), k) == std::end(kKeys)) {
      return Bad(k, "unknown key");
    }
  }
  JobRecord job;
  const json& command = Field(j, "command");
  if (!command.is_array() || command.empty()) return Bad("command", "expected a non-empty list");
  for (const json& a : command) {
    if (!a.is_string()) return Bad("command", "expected strings");
    job.command.push_back(a.get<std::string>());
  }
  job.name = Field(j, "name").is_string() ? Field(j, "name").get<std::string>() : job.command[0];
  JobSpec& s = job.spec;
  REEL_ASSIGN_OR_RETURN(s.min_workers, Int(Field(j, "workers"), 1, 1, 100000, "workers"));
  REEL_ASSIGN_OR_RETURN(s.max_workers, Int(Field(j, "max_workers"), s.min_workers, s.min_workers,
                                           100000, "max_workers"));
  s.per_worker = Resources{1000, 0, 0};
  REEL_RETURN_IF_ERROR(ReadResources(Field(j, "resources"), &s));
  s.queue = Field(j, "queue").is_string() ? Field(j, "queue").get<std::string>() : "default";
  REEL_ASSIGN_OR_RETURN(s.priority, Int(Field(j, "priority"), 0, -1000000, 1000000, "priority"));
  if (!Field(j, "spot").is_null() && !Field(j, "spot").is_boolean()) {
    return Bad("spot", "expected true or false");
  }
  s.spot_ok = Field(j, "spot").is_boolean() && Field(j, "spot").get<bool>();
  if (!Field(j, "time_limit").is_null()) {
    REEL_ASSIGN_OR_RETURN(std::string text, Text(Field(j, "time_limit"), "time_limit"));
    Result<std::chrono::milliseconds> d = ParseDuration(text);
    if (!d.ok()) return Bad("time_limit", std::string(d.status().message()));
    s.time_limit = *d;
  }
  REEL_ASSIGN_OR_RETURN(s.node_selector, StringMap(Field(j, "node_selector"), "node_selector"));
  REEL_ASSIGN_OR_RETURN(job.env, StringMap(Field(j, "env"), "env"));
  job.workdir = Field(j, "workdir").is_string() ? Field(j, "workdir").get<std::string>() : "";
  if (!Field(j, "ttl_after_finished").is_null()) {
    REEL_ASSIGN_OR_RETURN(std::string text,
                          Text(Field(j, "ttl_after_finished"), "ttl_after_finished"));
    Result<std::chrono::milliseconds> d = ParseDuration(text);
    if (!d.ok()) return Bad("ttl_after_finished", std::string(d.status().message()));
    job.ttl_after_finished = *d;
  }
  return job;
}

json JobToJson(const JobRecord& job) {
  const JobSpec& s = job.spec;
  json j = {{"id", s.id},
            {"name", job.name},
            {"command", job.command},
            {"workers", s.min_workers},
            {"max_workers", s.max_workers},
            {"resources",
             {{"cpu", FormatCpu(s.per_worker.cpu_millis)},
              {"memory", FormatMemory(s.per_worker.memory_bytes)},
              {"gpu", s.per_worker.gpu}}},
            {"queue", s.queue},
            {"priority", s.priority},
            {"spot", s.spot_ok},
            {"node_selector", s.node_selector},
            {"env", job.env},
            {"workdir", job.workdir},
            {"ttl_after_finished", FormatDuration(job.ttl_after_finished)},
            {"state", job.state},
            {"attempts", job.attempts},
            {"preemptions", job.preemptions},
            {"cost", job.cost},
            {"reason", job.reason},
            {"nodes", job.nodes},
            {"shim_pid", job.shim_pid},
            {"stop", job.stop},
            {"submitted_ms", job.submitted_ms},
            {"started_ms", job.started_ms},
            {"finished_ms", job.finished_ms}};
  if (s.time_limit) j["time_limit"] = FormatDuration(*s.time_limit);
  j["exit_code"] = job.exit_code ? json(*job.exit_code) : json();
  return j;
}

std::string JobStore::DatabaseUri(const std::string& state_dir, const std::string& database) {
  return database.empty() ? state_dir + "/state.db" : database;
}

json ResourcesToJson(const Resources& r) {
  json j = {{"cpu", FormatCpu(r.cpu_millis)}, {"gpu", r.gpu}};
  if (r.memory_bytes > 0) j["memory"] = FormatMemory(r.memory_bytes);
  return j;
}

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& state_dir,
                                                 const std::string& database) {
  std::error_code error;
  std::filesystem::create_directories(state_dir, error);
  if (error)
    return UnavailableError("scheduler state folder " + state_dir + ": " + error.message());
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<db::Database> db,
                        db::Open(DatabaseUri(state_dir, database)));
  REEL_RETURN_IF_ERROR(db::Migrate(*db, "sched", internal::SchedMigrations()));
  return std::unique_ptr<JobStore>(new JobStore(std::move(db)));
}

namespace {

// The submitted part, as stored: JobToJson's fields that JobFromJson reads back.
std::string SpecText(const JobRecord& job) {
  json j = JobToJson(job);
  json spec;
  for (const char* k :
       {"name", "command", "workers", "max_workers", "resources", "queue", "priority", "spot",
        "node_selector", "env", "workdir", "time_limit", "ttl_after_finished"}) {
    if (j.contains(k)) spec[k] = j[k];
  }
  return Dump(spec);
}

constexpr std::string_view kColumns =
    "id, spec, state, attempts, preemptions, cost, exit_code, reason, nodes, shim_pid, stop, "
    "submitted_ms, started_ms, finished_ms";

Result<JobRecord> FromRow(db::Row& row) {
  REEL_ASSIGN_OR_RETURN(json spec, ParseJson(row.Text(1), "a job record"));
  REEL_ASSIGN_OR_RETURN(JobRecord job, JobFromJson(spec));
  job.spec.id = row.TakeText(0);
  job.state = row.TakeText(2);
  job.attempts = static_cast<int>(row.Int(3));
  job.preemptions = static_cast<int>(row.Int(4));
  job.cost = row.Real(5);
  if (!row.IsNull(6)) job.exit_code = static_cast<int>(row.Int(6));
  job.reason = row.TakeText(7);
  REEL_ASSIGN_OR_RETURN(json nodes, ParseJson(row.Text(8), "a job record"));
  if (!nodes.is_array()) return DataLossError("job " + job.spec.id + ": malformed nodes");
  for (const json& n : nodes) job.nodes.push_back(n.is_string() ? n.get<std::string>() : "");
  job.shim_pid = row.Int(9);
  job.stop = row.TakeText(10);
  job.submitted_ms = row.Int(11);
  job.started_ms = row.Int(12);
  job.finished_ms = row.Int(13);
  return job;
}

}  // namespace

Status JobStore::Fenced(const std::function<Status()>& write) {
  return db_->Transact([&]() -> Status {
    if (fence_) REEL_RETURN_IF_ERROR(CheckFence(*db_, *fence_));
    return write();
  });
}

Result<std::string> JobStore::Add(JobRecord* job) {
  job->state = "pending";
  REEL_RETURN_IF_ERROR(Fenced([&]() -> Status {
    REEL_ASSIGN_OR_RETURN(std::vector<db::Row> rows, db_->Query("SELECT MAX(seq) FROM sched_jobs"));
    const int64_t seq = rows.empty() || rows[0].IsNull(0) ? 1 : rows[0].Int(0) + 1;
    job->spec.id = "job-" + std::to_string(seq);
    return db_
        ->Exec(
            "INSERT INTO sched_jobs (id, seq, spec, state, attempts, preemptions, cost, reason, "
            "nodes, shim_pid, stop, submitted_ms, started_ms, finished_ms) VALUES (?, ?, ?, ?, "
            "0, 0, 0, '', '[]', 0, '', ?, 0, 0)",
            {job->spec.id, seq, SpecText(*job), job->state, job->submitted_ms})
        .status();
  }));
  return job->spec.id;
}

Status JobStore::Update(const JobRecord& job) {
  db::Value exit_code;  // NULL unless it has one
  if (job.exit_code) exit_code = int64_t{*job.exit_code};
  return Fenced([&] {
    return db_
        ->Exec(
            "UPDATE sched_jobs SET state = ?, attempts = ?, preemptions = ?, cost = ?, "
            "exit_code = ?, reason = ?, nodes = ?, shim_pid = ?, stop = ?, started_ms = ?, "
            "finished_ms = ? WHERE id = ?",
            {job.state, int64_t{job.attempts}, int64_t{job.preemptions}, job.cost, exit_code,
             job.reason, Dump(json(job.nodes)), job.shim_pid, job.stop, job.started_ms,
             job.finished_ms, job.spec.id})
        .status();
  });
}

Result<JobRecord> JobStore::Get(const std::string& id) {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db_->Query("SELECT " + std::string(kColumns) + " FROM sched_jobs WHERE id = ?", {id}));
  if (rows.empty()) return NotFoundError("no job '" + id + "' (reel jobs ls)");
  return FromRow(rows[0]);
}

Result<std::vector<JobRecord>> JobStore::List(const std::vector<std::string>& states) {
  REEL_ASSIGN_OR_RETURN(std::vector<db::Row> rows, db_->Query("SELECT " + std::string(kColumns) +
                                                              " FROM sched_jobs ORDER BY seq"));
  std::vector<JobRecord> jobs;
  for (db::Row& row : rows) {
    REEL_ASSIGN_OR_RETURN(JobRecord job, FromRow(row));
    if (!states.empty() && std::find(states.begin(), states.end(), job.state) == states.end()) {
      continue;
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace reel::sched
