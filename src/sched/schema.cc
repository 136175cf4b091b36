// The "sched" component's tables (db/database.h's portable subset): pipeline runs, their tasks
// and the step cache (step 1); the job scheduler's jobs (step 2); the lease that says which
// scheduler daemon leads (step 3). A released step never changes.
#include "sched/schema.h"

namespace reel::sched::internal {

const std::vector<db::Migration>& SchedMigrations() {
  static const std::vector<db::Migration> kSteps = {{1, R"sql(
CREATE TABLE sched_runs (
  id TEXT PRIMARY KEY,
  pipeline TEXT NOT NULL,
  seq BIGINT NOT NULL,
  source_name TEXT NOT NULL,
  source TEXT NOT NULL,
  inputs TEXT NOT NULL,
  workdir TEXT NOT NULL,
  state TEXT NOT NULL,
  failed_task TEXT NOT NULL,
  runner_pid BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  finished_ms BIGINT NOT NULL,
  ttl_ms BIGINT NOT NULL,
  scratch_removed BIGINT NOT NULL);
CREATE INDEX sched_runs_by_pipeline ON sched_runs (pipeline, seq);
CREATE TABLE sched_tasks (
  run_id TEXT NOT NULL,
  name TEXT NOT NULL,
  position BIGINT NOT NULL,
  state TEXT NOT NULL,
  attempts BIGINT NOT NULL,
  exit_code BIGINT,
  reason TEXT NOT NULL,
  cache_key TEXT NOT NULL,
  cached_from TEXT NOT NULL,
  outputs TEXT NOT NULL,
  log TEXT NOT NULL,
  started_ms BIGINT NOT NULL,
  finished_ms BIGINT NOT NULL,
  PRIMARY KEY (run_id, name));
CREATE TABLE sched_cache (
  cache_key TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  task TEXT NOT NULL,
  outputs TEXT NOT NULL,
  created_ms BIGINT NOT NULL);
)sql"},
                                                    {2, R"sql(
CREATE TABLE sched_jobs (
  id TEXT PRIMARY KEY,
  seq BIGINT NOT NULL,
  spec TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts BIGINT NOT NULL,
  preemptions BIGINT NOT NULL,
  cost DOUBLE PRECISION NOT NULL,
  exit_code BIGINT,
  reason TEXT NOT NULL,
  nodes TEXT NOT NULL,
  shim_pid BIGINT NOT NULL,
  stop TEXT NOT NULL,
  submitted_ms BIGINT NOT NULL,
  started_ms BIGINT NOT NULL,
  finished_ms BIGINT NOT NULL);
CREATE INDEX sched_jobs_by_state ON sched_jobs (state, seq);
)sql"},
                                                    {3, R"sql(
CREATE TABLE sched_lease (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  url TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  renewals BIGINT NOT NULL,
  renewed_ms BIGINT NOT NULL);
)sql"}};
  return kSteps;
}

}  // namespace reel::sched::internal
