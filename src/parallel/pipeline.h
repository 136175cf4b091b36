// Pipeline (model) parallelism: a model split by layers into S stages, one per rank of a Comm
// (stage s on rank s), trained over M micro-batches per step, with activations sent forward and
// their gradients sent back by point-to-point messages.
//
// Schedules, as in the literature:
//   GPipe   every micro-batch's forward, then every backward; each stage holds the activations
//           of all M micro-batches at once.
//   1F1B    PipeDream-flush: stage s runs S-s-1 forwards to fill the pipe, then alternates one
//           forward and one backward, then drains; it holds at most S-s micro-batches' activations.
// Both compute the same gradients: each micro-batch's loss is weighted by its share of the batch,
// so the gradients accumulated in the stage's parameters equal one process's on the whole batch
// (up to float summation order). The idle share of each step, the bubble, is (S-1)/(M+S-1) in
// theory for both.
//
// Messages: a tensor's shape goes first (a fixed header of int64s), so micro-batches of different
// sizes (the last one of an uneven split) need nothing agreed beforehand; tags pair each message
// with its receive, and sends complete in the background while the stage computes.
//
// Errors: InvalidArgument for options that do not fit the Comm; Unavailable naming the peer when
// a message fails. Thread-safety: one PipelineStage per rank, used from one thread.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "parallel/comm.h"
#include "parallel/partition.h"

namespace reel::parallel {

// Each unit's cost on a real micro-batch, for partition.h's BalanceStages: forward and backward
// time (the least of `repeats` runs after a warm-up), its parameters' bytes, and its output's
// bytes (what the next unit receives; what a unit keeps for backward is more, so a memory plan
// from these is a lower bound).
using UnitForward = std::function<at::Tensor(int unit, const at::Tensor& x)>;
using UnitParameters = std::function<std::vector<at::Tensor>(int unit)>;
std::vector<UnitCost> ProfileUnits(const std::vector<std::string>& names,
                                   const UnitForward& forward, const UnitParameters& parameters,
                                   const at::Tensor& micro_batch, int repeats = 3);

enum class PipelineSchedule { kGPipe, k1F1B };
Result<PipelineSchedule> ParsePipelineSchedule(const std::string& name);  // "gpipe" or "1f1b"

struct PipelineOptions {
  int micro_batches = 4;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
};

// This stage's layers: the previous stage's output (the first stage: the batch) to its output.
using StageForward = std::function<at::Tensor(const at::Tensor&)>;
// The last stage's loss of one micro-batch: (its output, its targets) to a mean loss.
using StageLoss = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

struct PipelineStepResult {
  double loss = 0;          // the batch's mean loss (the last stage; 0 on others)
  int max_in_flight = 0;    // most micro-batches whose activations this stage held at once
  double busy_seconds = 0;  // computing (forward and backward)
  double step_seconds = 0;  // the whole step, waits included
};

class PipelineStage {
 public:
  static Result<PipelineStage> Make(Comm* comm, PipelineOptions options, StageForward forward,
                                    StageLoss loss = nullptr);

  int stage() const { return comm_->rank(); }
  int stages() const { return comm_->world_size(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() == stages() - 1; }

  // One step: the first stage gives the batch (split along dimension 0 into the micro-batches),
  // the last its targets; the others give undefined tensors. Gradients are accumulated into the
  // stage's parameters (zero them before, step the optimiser after, as with one process).
  Result<PipelineStepResult> Step(const at::Tensor& batch, const at::Tensor& targets);

  // The batch's targets from the first stage (which reads the data) to the last (which computes
  // the loss): call on every stage before Step; the last gets them, the others an undefined
  // tensor. On one stage, `targets` itself.
  Result<at::Tensor> ShareTargets(const at::Tensor& targets);

 private:
  PipelineStage(Comm* comm, PipelineOptions options, StageForward forward, StageLoss loss)
      : comm_(comm), o_(options), forward_(std::move(forward)), loss_(std::move(loss)) {}

  struct InFlight {
    at::Tensor input, output, loss;  // input requires grad on all but the first stage
  };

  Status Forward(int micro, const std::vector<at::Tensor>& inputs,
                 const std::vector<at::Tensor>& targets, double weight, InFlight* f,
                 double* loss_sum);
  Status Backward(int micro, InFlight* f);
  Status SendTensor(const at::Tensor& t, int peer, int tag, const std::string& what);
  Result<at::Tensor> RecvTensor(int peer, int tag, const std::string& what);
  Status FinishSends();

  Comm* comm_;
  PipelineOptions o_;
  StageForward forward_;
  StageLoss loss_;
  std::vector<PendingCollective> sends_;  // sends in flight, kept (and their tensors) until done
  std::vector<at::Tensor> send_buffers_;
  double busy_seconds_ = 0;
};

}  // namespace reel::parallel
