// `reel scheduler serve`: the job scheduler as a service. It keeps jobs in the state folder's
// database, runs the scheduler core (scheduler.h) every tick, carries out its decisions on this
// machine through one supervisor process per job (shim.h), and answers an HTTP JSON API:
//
//   POST /v1/jobs                      submit (jobs.h's JSON); 201 with the job
//   GET  /v1/jobs[?state=S]            jobs in submission order
//   GET  /v1/jobs/{id}                 one job
//   POST /v1/jobs/{id}/cancel          stop it (SIGTERM, grace, SIGKILL) or take it out of line
//   GET  /v1/jobs/{id}/logs[?worker=N] a worker's output (text)
//   GET  /v1/nodes, GET /v1/queues     capacities, free room, quotas and use
//   POST /v1/nodes/{name}/reclaim      a spot node is taken back: its jobs are preempted
//   POST /v1/nodes/{name}/restore      it takes work again
//   GET  /healthz
//
// Preemption: the job's session gets SIGTERM and, after the grace, SIGKILL; a job that stops
// (preempted, exit 75 from `reel train`, or killed) is requeued at its place in line and resumes
// from its checkpoint when it starts again. A job past its time limit or cancelled ends.
// Durability: every change is written before it is acted on; kill -9 of the daemon leaves its
// jobs running under their supervisors, and a restart adopts them (nothing starts twice), reads
// the exits that happened meanwhile, and requeues a job whose supervisor vanished.
// High availability: daemons sharing one database (PostgreSQL, `database`) and one state folder
// (a shared file system) elect a leader through a lease in the database (lease.h). Only the
// leader schedules; the others answer the API with 503 naming the leader's URL (/healthz says
// each one's role) and take over within `lease` of the leader's death, adopting its jobs as a
// restart does. Every write of the leader is fenced by its lease, and a job's start is recorded
// before it happens, so a job is never started by two daemons.
// Every worker runs on this machine: the cluster file's nodes divide its capacity (the Slurm
// executor, next, runs them on real nodes). Each worker gets RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun's), REEL_JOB_ID and REEL_NODE.
//
// Thread-safety: Start/Shutdown from one thread; the API and the tick share a mutex.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/status.h"

namespace reel::sched {

namespace internal {
class JobRunner;
}

struct DaemonOptions {
  std::string state_dir;
  // YAML with `nodes` (name, cpu, memory, gpu, spot, cost_per_hour, labels) and `queues` (name,
  // quota, borrowing_limit, weight); empty: this machine as one node, one queue "default".
  std::string cluster_file;
  std::string host = "127.0.0.1";
  int port = 8700;  // 0: a free port
  std::chrono::milliseconds tick{100};
  std::chrono::milliseconds grace{10000};  // SIGTERM to SIGKILL
  std::string reel_binary;                 // runs the shims and "reel" commands; "": this one
  std::string database;  // db::Open URI of the jobs' database; "": the state folder's SQLite
  std::string identity;  // this daemon among those sharing the database; "": the machine's name
  std::chrono::milliseconds lease{5000};  // a standby takes over after this long unrenewed
  std::string url_file;                   // "": none; else the API's URL, written on leading
  // For tests: the clock the core and the grace periods read (null: the system's), the engine
  // that runs the jobs (null: the cluster file's), and no tick thread (the test calls Tick()).
  Clock* clock = nullptr;
  std::shared_ptr<internal::JobRunner> runner;
  bool tick_thread = true;
};

class Daemon {
 public:
  // Opens the state, adopts the jobs a previous daemon left, starts the API and the tick.
  // Errors: the cluster file's (InvalidArgument with file:line), the database's, the port's.
  static Result<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  ~Daemon();
  std::string url() const;
  bool leading() const;
  // One scheduling cycle now: collect ended jobs, run the core, act on its decisions (the tick
  // thread does this every `tick`).
  Status Tick();
  // Stops the API and the tick and gives up the lease; running jobs go on under their
  // supervisors.
  void Shutdown();

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::sched
