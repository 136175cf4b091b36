// One process training a video classifier end to end, and evaluating it.
//
// RunTraining: builds the model (seeded), the optimiser and the loader from the config; trains
// for epochs or max_steps with warmup + cosine learning rates, gradient accumulation, clipping,
// label smoothing and (on CUDA) mixed precision; writes one JSON line per `log_every` steps to
// <run_dir>/metrics.jsonl ({"step", "epoch", "loss", "lr", "clips_per_s", "input_wait_s",
// "input_wait_share", ...}) with a progress bar on a terminal; evaluates the validation split
// every `eval_every_epochs` epochs and at the end (<run_dir>/eval.json); checkpoints every
// `checkpoint.every_steps` steps and at the end.
//
// Resuming (`resume`): continues from the latest checkpoint (model, optimiser, loss scaler, RNG,
// loader position, step), so that with the same thread count the losses after resuming equal an
// uninterrupted run's. Resuming at another world size (an elastic job, resized) keeps the step
// count and the per-process batch; the loader reads the rest of the epoch split across the new
// world (sample_plan.h). Without `resume`, existing checkpoints at the URI are an error
// (FailedPrecondition) rather than being overwritten.
//
// Data parallel (options.world with more than one process): every rank builds the same model,
// takes rank 0's parameters and buffers, reads its own share of each epoch (loader plan by rank)
// and averages gradients through parallel::Reducer (buckets overlapped with backward; no_sync on
// the accumulation micro-batches; rank 0's buffers before each forward when
// dist.broadcast_buffers). Rank 0 alone writes metrics, checkpoints and evaluations while the
// others wait for it; every rank resumes from the checkpoint step rank 0 chose, so checkpoints must
// be on storage every node reads. Samples and clips/s count the whole job; the logged loss is the
// mean over ranks, with each rank's in "rank_losses" (one small all-reduce per logging window).
//
// Pipeline and hybrid (parallel.pipeline_stages S > 1, world a multiple of S): the world is
// world/S replicas of an S-stage pipeline (parallel/mesh.h). Rank 0 times each unit of the model
// (stem, residual blocks, head) on a micro-batch of the configured shape and cuts it into S
// stages where the slowest is fastest (parallel/partition.h); every rank builds the whole model,
// then (all but rank 0, which evaluates it) drops the other stages' weights, trains its stage's
// units with its own optimiser (parallel/pipeline.h, GPipe or 1F1B over
// parallel.micro_batches) and averages their gradients with the same stage of the other replicas.
// The first stage of each replica reads its share of the data and sends the labels to the last;
// gradient clipping and the fp16 loss scaler's skip decision span the stages. Rank 0 gathers
// every stage's weights to evaluate; checkpoints are sharded (checkpoint.h), one shard per stage
// written by replica 0, and load into any layout (another S, data parallel, one process).
// Batch norm normalises each micro-batch on its own, so a pipeline step equals one process
// accumulating the same micro-batches, not one process on the whole batch.
//
// Errors: InvalidArgument (config against the dataset: class count, too few samples for a
// batch, unavailable device; pipeline stages that do not fit the world or the model),
// FailedPrecondition (checkpoints exist and resume is off; a
// checkpoint from another model), the loader's and the stores', Internal for non-finite losses
// without a loss scaler (the run diverged; the message says at which step).
// Distributed: Unavailable from the process group (a peer died or hangs: the watchdog's report
// names it), FailedPrecondition on ranks other than 0 when rank 0 could not start.
// Thread-safety: one call per process at a time (LibTorch's thread count and RNG are global).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "parallel/world.h"
#include "train/metrics.h"
#include "train/train_config.h"

namespace reel::train {

struct StepMetrics {
  int64_t step = 0;  // optimiser steps done
  int64_t epoch = 0;
  double loss = 0;                  // mean over the logging window (and over ranks)
  std::vector<double> rank_losses;  // each rank's mean over the window; empty with one process
  double lr = 0;
  double clips_per_s = 0;
  double input_wait_s = 0;  // loader wait within the window
  double input_wait_share = 0;
  double grad_norm = 0;       // before clipping (0 when clipping is off)
  int64_t skipped_steps = 0;  // fp16 steps skipped for inf/NaN gradients, in total
};

struct TrainOptions {
  bool resume = false;
  // Stop after this many optimiser steps in this process (the run stays resumable), e.g. to
  // simulate a job that is preempted. <= 0: run to the end.
  int64_t stop_after_steps = 0;
  // Asked after every step: true stops the run there with a checkpoint (a preemption; see
  // base/stop_request.h). Every rank of a data-parallel job stops at the same step when any rank
  // is asked. Null: never.
  std::function<bool()> should_stop;
  bool progress = true;
  std::function<void(const StepMetrics&)> on_log;  // called for every metrics line
  // This process's place in a data-parallel job (parallel/world.h); one process by default.
  parallel::WorldInfo world;
};

struct TrainResult {
  int64_t steps = 0;          // optimiser steps done in total
  int64_t resumed_from = -1;  // step of the checkpoint resumed from, -1 when started fresh
  int64_t samples = 0;        // training samples seen in total
  double seconds = 0;
  bool finished = false;           // reached the run's end (not stopped early)
  bool preempted = false;          // stopped by should_stop (a checkpoint was written)
  std::optional<EvalReport> eval;  // the final evaluation, when finished
  std::string registered;          // the registered version's URI (registry.model), or ""
};

Result<TrainResult> RunTraining(const TrainConfig& config, const TrainOptions& options = {});

struct EvalOptions {
  // The weights: a registry version (models:/NAME/3, models:/NAME@production; the registry of
  // the config's registry section) or a safetensors file. "" = a checkpoint of the run.
  std::string weights;
  std::string checkpoint_uri;   // "" = the config's checkpoint URI
  std::optional<int64_t> step;  // a checkpoint step; latest when empty
  std::string split;            // "" = the config's val_split
  int eval_clips = 0;           // 0 = the config's
};

// Evaluates a checkpoint, registered version or safetensors file on a split. NotFound when there
// is no checkpoint (or no such version).
Result<EvalReport> RunEvaluation(const TrainConfig& config, const EvalOptions& options = {});

}  // namespace reel::train
