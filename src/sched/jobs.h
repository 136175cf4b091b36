// The scheduler daemon's jobs as records: what a user submits (a command, its workers and their
// resources, queue, priority, ...), what became of it, and where that is kept (the state folder's
// SQLite database or a PostgreSQL database, table sched_jobs). The JSON form is the HTTP API's.
//
//   {"name": "train", "command": ["reel", "train", ...], "workers": 2, "max_workers": 2,
//    "resources": {"cpu": "2", "memory": "4Gi", "gpu": 0}, "queue": "default", "priority": 0,
//    "spot": false, "time_limit": "2h", "node_selector": {}, "env": {}, "workdir": "/path",
//    "ttl_after_finished": "1h"}
//
// Errors: InvalidArgument naming the field for a bad job; NotFound for an unknown id;
// Unavailable when the database cannot be used. Thread-safety: one JobStore per thread.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "db/database.h"
#include "sched/lease.h"
#include "sched/scheduler.h"

namespace reel::sched {

// pending (waiting in line), running, stopping (asked to stop: preempted, resized, cancelled,
// past its time limit), succeeded, failed, cancelled.
struct JobRecord {
  JobSpec spec;  // spec.id is the job's id
  std::string name;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  // Its scratch folder ($REEL_SCRATCH) is removed this long after it ends (Kubernetes'
  // ttlSecondsAfterFinished); logs stay.
  std::chrono::milliseconds ttl_after_finished{0};

  std::string state = "pending";
  int attempts = 0;     // times started
  int preemptions = 0;  // times stopped to make room, then requeued
  double cost = 0;
  std::optional<int> exit_code;
  std::string reason;
  std::vector<std::string> nodes;  // while running: each worker's node
  int64_t shim_pid = 0;            // while running: its supervisor (leads the job's session)
  std::string stop;                // while stopping: "preempt", "resize", "stop" or "cancel"
  int64_t submitted_ms = 0, started_ms = 0, finished_ms = 0;
};

// The submitted part of a job from its JSON; `id` is given by the store. Every field but
// `command` has a default.
Result<JobRecord> JobFromJson(const nlohmann::json& submitted);
// The whole record, for the API's answers.
nlohmann::json JobToJson(const JobRecord& job);
// A submission's "resources" (memory left out when none is asked).
nlohmann::json ResourcesToJson(const Resources& r);

class JobStore {
 public:
  // `database`: a db::Open URI (PostgreSQL for daemons on several machines); "": the state
  // folder's SQLite file.
  static Result<std::unique_ptr<JobStore>> Open(const std::string& state_dir,
                                                const std::string& database = "");
  // The URI Open uses for these arguments.
  static std::string DatabaseUri(const std::string& state_dir, const std::string& database);

  // Every later write checks `fence` in its transaction (lease.h) and fails once another
  // daemon leads; none: writes are not fenced.
  void SetFence(std::optional<Fence> fence) { fence_ = std::move(fence); }

  // Gives the job an id (job-N) and records it pending.
  Result<std::string> Add(JobRecord* job);
  Status Update(const JobRecord& job);
  Result<JobRecord> Get(const std::string& id);
  // In submission order; `states` empty: all.
  Result<std::vector<JobRecord>> List(const std::vector<std::string>& states = {});

 private:
  explicit JobStore(std::unique_ptr<db::Database> db) : db_(std::move(db)) {}
  Status Fenced(const std::function<Status()>& write);
  std::unique_ptr<db::Database> db_;
  std::optional<Fence> fence_;
};

}  // namespace reel::sched
