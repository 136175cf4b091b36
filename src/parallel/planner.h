// Choosing a job's layout (`parallel: auto`): data parallel, pipeline, or both, from what a
// replica needs in memory, what a step costs in compute and communication, and what the workers
// have. The rule of thumb it refines: data parallel while a replica fits a worker, pipeline x
// data beyond.
//
// For every layout D x S of the world (S dividing it, D = world / S, at most as many stages as
// units) it estimates, from the units' costs measured on one micro-batch (pipeline.h's
// ProfileUnits) and a replica's batch of B clips in M micro-batches:
//   memory    each stage's parameters x state_copies plus its activations x the micro-batches in
//             flight on it (partition.h; S = 1 holds the whole batch's activations)
//   compute   S = 1: the whole model on B clips; S > 1: the slowest stage (partition.h's cut) on
//             one micro-batch x (M + S - 1), the pipeline's fill and drain included
//   messages  S > 1: a micro-batch's activations and their gradients across the busiest cut,
//             (M + S - 1) times, at link speed
//   all-reduce D > 1: 2 (D-1)/D x the largest stage's parameter bytes at link speed (ring);
//             data parallel's reducer overlaps it with backward (about 2/3 of the compute), so
//             only what outlasts backward counts there; a pipeline averages after its step
// and its throughput, D x B clips per step time. Among the layouts that fit, the fastest wins;
// data parallel keeps the job unless another layout is `margin` faster, since the estimate
// cannot see a pipeline's uneven stages as well as a measurement does. Every layout considered is
// kept with its figures, and the choice comes with a sentence saying why.
//
// Errors: InvalidArgument for inputs out of range, and when no layout fits (naming the least
// memory a stage would need at the most stages). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "parallel/partition.h"

namespace reel::parallel {

struct LayoutInputs {
  std::vector<UnitCost> units;  // measured on one micro-batch of `measured_clips` clips
  int measured_clips = 1;
  int batch = 8;          // clips per replica per step
  int micro_batches = 4;  // per pipeline step
  bool gpipe = false;     // GPipe holds every micro-batch in flight; 1F1B at most S - s
  int world = 1;
  int64_t worker_memory = 0;  // bytes per process; 0: unlimited
  double link_bytes_per_s = 1e9;
  int state_copies = 3;  // weights, gradients and the optimiser's state (SGD momentum: 3)
  double margin = 0.10;  // what another layout must gain over data parallel
};

struct Layout {
  int replicas = 1, stages = 1;
  bool fits = false;
  int64_t memory_bytes = 0;  // the most any stage needs
  double compute_seconds = 0, message_seconds = 0, allreduce_seconds = 0;
  double exposed_allreduce_seconds = 0;  // what the step waits for (after any overlap)
  double step_seconds = 0;
  double clips_per_second = 0;
  std::vector<int> cuts;  // S + 1 unit indices
};

struct LayoutChoice {
  Layout chosen;
  std::vector<Layout> considered;  // every D x S, fitting or not, by ascending S
  std::string why;
};

Result<LayoutChoice> ChooseLayout(const LayoutInputs& inputs);

// The micro-batches whose activations each stage of a pipeline holds at most: all M under GPipe,
// S - s under 1F1B (never more than M).
std::vector<int> MicroBatchesInFlight(int stages, int micro_batches, bool gpipe);

// "2 x 2 (2 replicas of 2 stages)", "4 x 1 (data parallel)", "1 x 4 (pipeline)".
std::string LayoutName(const Layout& layout);

}  // namespace reel::parallel
