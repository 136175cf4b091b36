// A job trace replayed through the scheduler's core (scheduler.h) on a simulated cluster with a
// simulated clock: the same admission, ordering, gangs, backfill and preemption as the daemon,
// with each job's run taking its traced duration. A preempted job resumes where it stopped (it
// checkpoints, as `reel train` does), so preemption costs waiting, not work.
//
// Policies (how the core is set up; every one with or without EASY backfill):
//   fifo      one queue, submission order, no preemption
//   priority  classes by size: 1-GPU jobs first, then up to 8 GPUs, then larger; preemptive
//   sjf       shortest first by the traced duration (an oracle estimate), not preemptive
//   las       Tiresias' discretised two-dimensional least attained service: jobs are demoted as
//             their GPU-seconds pass 1 and 10 GPU-hours; a higher queue's job preempts a lower
//   drf       a queue per virtual cluster of the trace, taking turns by dominant share (DRF),
//             submission order within each, no preemption
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::sched {

struct TraceJob {
  int64_t submit_s = 0;    // since the trace's first submission
  int64_t duration_s = 0;  // of its run, once started
  int gpus = 1;
  std::string queue;  // the trace's virtual cluster
};

// The Philly trace's CSV (timestamp,duration,num_gpus,gpu_time,cluster; rows in any order),
// sorted by submission. Errors: NotFound, InvalidArgument naming the line and column.
Result<std::vector<TraceJob>> ReadPhillyTrace(const std::string& path);

enum class Policy { kFifo, kPriority, kSjf, kLas, kDrf };
// "fifo", "priority", "sjf", "las", "drf".
const char* PolicyName(Policy policy);
Result<Policy> ParsePolicy(const std::string& name);

struct SimulationOptions {
  Policy policy = Policy::kFifo;
  bool backfill = true;
  int nodes = 0;  // 0: sized so that the trace's offered load is 80% of the cluster
  int gpus_per_node = 8;
};

// A job started: when (seconds since the trace's start) and on which nodes ("n0", "n1", ...).
struct Placement {
  size_t job = 0;  // index in the trace
  int64_t at_s = 0;
  std::vector<std::string> nodes;

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.job == b.job && a.at_s == b.at_s && a.nodes == b.nodes;
  }
};

struct SimulationResult {
  int nodes = 0;
  int64_t jobs = 0;
  double avg_jct_s = 0;  // completion minus submission
  double p95_jct_s = 0;
  double avg_queue_s = 0;  // time not running: completion minus submission minus duration
  double makespan_s = 0;   // last completion minus first submission
  double utilisation = 0;  // GPU-seconds run over GPU-seconds the cluster had in the makespan
  int64_t preemptions = 0;
  double wall_s = 0;                  // the simulation's own time
  std::vector<Placement> placements;  // every start, in order
};

// Errors: InvalidArgument for a job larger than the cluster or an empty trace.
Result<SimulationResult> Simulate(const std::vector<TraceJob>& jobs,
                                  const SimulationOptions& options);

}  // namespace reel::sched
