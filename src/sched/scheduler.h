// The job scheduler's core: which pending job starts where, and which running jobs make way. It
// decides and an executor carries the decisions out (local processes, Slurm), as Kueue decides
// admission and Kubernetes runs the pods. No clock, threads or I/O of its own: callers pass the
// time, so tests run it on a fake clock and the benchmark at full speed.
//
// The model:
//   - Nodes with capacities (cpu, memory, gpu), labels, and a cost per hour; spot nodes are
//     cheaper and can be reclaimed.
//   - Queues, one per team, each with a guaranteed quota and a borrowing limit: a queue may use
//     what other queues leave unused, up to quota + borrowing limit, and gets its quota back by
//     preempting borrowers when it needs it (Kueue's ClusterQueue in one cohort).
//   - Jobs with a priority, a number of workers and a request per worker. A job is a gang: all its
//     workers are placed in one decision or none is. An elastic job (min_workers < max_workers)
//     starts with as many as fit, at least min_workers.
//
// Each Schedule() is one cycle:
//   1. Order: each queue's jobs by priority, then submission; across queues, the queue with the
//      smallest dominant share (DRF: its largest fraction of any resource, over its weight)
//      goes first.
//   2. The first job in that order that does not fit may preempt: lower-priority jobs of its own
//      queue, and jobs of queues using more than their quota when its own queue is within its
//      quota (reclaim). Victims are chosen newest first and the fewest that make room; they get
//      SIGTERM and a grace period (Preempt decisions) and are requeued when they have stopped.
//   3. Otherwise it holds a reservation (EASY backfill): the time its resources will be free,
//      assuming running jobs end by their time limits, and the nodes it will use then. Later jobs
//      start before it only when they end before that time or stay off those nodes, so a
//      backfilled job never delays it.
// Spot nodes take only jobs that accept them (and those prefer them, cheapest first); reclaiming
// one preempts its jobs. Every job's cost is the sum of its nodes' cost per hour over its run.
//
// Errors: InvalidArgument for a bad job or node (a job that could never fit, an unknown queue, a
// duplicate id), NotFound for an unknown job or node. Thread-safety: none; one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "sched/pipeline.h"

namespace reel::sched {

struct Node {
  std::string name;
  Resources capacity;
  std::map<std::string, std::string> labels;
  bool spot = false;
  double cost_per_hour = 0;
};

struct QueueSpec {
  std::string name;
  Resources quota;            // guaranteed
  Resources borrowing_limit;  // at most this much more, from what other queues leave unused
  double weight = 1;          // fair share: a queue of weight 2 gets twice the dominant share
};

struct JobSpec {
  std::string id;
  std::string queue;
  int priority = 0;
  Resources per_worker;
  int min_workers = 1, max_workers = 1;  // equal: a gang of that size; else elastic
  bool spot_ok = false;
  std::map<std::string, std::string> node_selector;  // labels a node must have
  std::optional<std::chrono::milliseconds> time_limit;
};

enum class JobPhase { kPending, kRunning, kStopping, kDone };

// What the scheduler wants done. Start: run the job's workers on these nodes (one entry per
// worker). Preempt: stop it (SIGTERM, grace, SIGKILL), then call Stopped() so that it is
// requeued. Resize: an elastic job's new placement (stop it, call Stopped(), and start it again
// there; it resumes from its checkpoint). Stop: stop it for good (time limit, cancel), then
// Finished().
struct Decision {
  enum class Kind { kStart, kPreempt, kResize, kStop };
  Kind kind;
  std::string job;
  std::vector<std::string> nodes;  // kStart, kResize: the node of each worker
  std::string reason;              // kPreempt, kResize, kStop: why, for the job's record
};

struct JobView {
  JobSpec spec;
  JobPhase phase = JobPhase::kPending;
  std::vector<std::string> nodes;  // while running or stopping
  int preemptions = 0;
  double cost = 0;     // over its finished runs
  std::string reason;  // why it waits (pending) or last stopped
};

struct SchedulerOptions {
  // For jobs without a time limit, in backfill's reckoning of when resources free up (Slurm's
  // DefaultTime).
  std::chrono::milliseconds default_time_limit{24 * 3600 * 1000};
  int max_backfill_tests =
      500;  // jobs tried behind a blocked one per cycle (Slurm's bf_max_job_test); 0: no backfill
  bool preemption = true;  // false: a job that does not fit waits, whatever its priority
};

// Counters since Make, for benchmarks and the daemon's metrics.
struct SchedulerStats {
  uint64_t cycles = 0;
  uint64_t tried = 0;      // jobs considered for a start
  uint64_t started = 0;    // Start decisions
  uint64_t preempted = 0;  // jobs asked to stop or shrink for another
};

class Scheduler {
 public:
  // With no queues, one queue "default" whose quota is the whole cluster.
  static Result<std::unique_ptr<Scheduler>> Make(std::vector<Node> nodes,
                                                 std::vector<QueueSpec> queues,
                                                 SchedulerOptions options = {});
  ~Scheduler();

  // Submit's checks without queueing the job (its id is not checked).
  Status Validate(const JobSpec& job) const;
  // Queues a job. Errors: InvalidArgument when the id is taken, the queue unknown, the request
  // empty or larger than any node, or the gang larger than its queue's limit or the cluster.
  Status Submit(JobSpec job, Clock::TimePoint now);
  // A job that was running when the scheduler's process stopped (its state is read back from
  // the daemon's database): running again at once on `nodes`, one per worker, since `started`.
  // Errors: as Submit, and InvalidArgument for an unknown node or nodes without room.
  Status Adopt(JobSpec job, const std::vector<std::string>& nodes, Clock::TimePoint started);
  // Removes a pending job, or returns a Preempt-like stop for a running one (nullopt when the
  // job is pending or already stopping). Errors: NotFound.
  Result<std::optional<Decision>> Cancel(const std::string& job, Clock::TimePoint now);

  // One scheduling cycle at `now`.
  std::vector<Decision> Schedule(Clock::TimePoint now);

  // The executor reports: a running job's processes ended for good (success, failure, time
  // limit, cancel, or a job asked to stop that finished its work first): its resources are free.
  // Errors: NotFound.
  Status Finished(const std::string& job, Clock::TimePoint now);
  // A preempted (or resized-down) job's processes have stopped: requeued at its old place in
  // line, or for a resize, started again on its new placement (a Start decision is returned).
  Result<std::optional<Decision>> Stopped(const std::string& job, Clock::TimePoint now);

  // A spot node is taken back: every job on it is preempted (returned as decisions) and the node
  // takes no work until Restore(). Errors: NotFound.
  Result<std::vector<Decision>> Reclaim(const std::string& node, Clock::TimePoint now);
  Status Restore(const std::string& node);

  // A new priority for a job: a pending one moves to its new place in line (submission order
  // among equals); a running one is judged by it when another looks for jobs to preempt.
  // Errors: NotFound.
  Status SetPriority(const std::string& job, int priority);

  // A job that ended (Finished) goes back in line at its old place: it stopped by itself to be
  // run again (exit 75 without being asked). Errors: NotFound; FailedPrecondition unless done.
  Status Requeue(const std::string& job);

  struct NodeView {
    Node spec;
    Resources free;
    bool cordoned = false;
  };
  std::vector<NodeView> Nodes() const;
  std::vector<QueueSpec> Queues() const;

  Result<JobView> Job(const std::string& job) const;
  size_t pending() const;
  size_t running() const;
  // A queue's resources in use (running and stopping jobs).
  Result<Resources> QueueUsage(const std::string& queue) const;
  const SchedulerStats& stats() const;

 private:
  struct State;
  explicit Scheduler(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace reel::sched
