// A training run's pipeline stages (parallel.pipeline_stages > 1): the world is replicas x
// stages (parallel/mesh.h); every rank builds the whole model (the same seed, then rank 0's
// weights), keeps only its stage's weights (rank 0 keeps all: it evaluates and registers the
// model), trains its units' parameters with its own optimiser, and averages their gradients with
// the same stage of the other replicas. The first stage of each replica reads the data; the last
// computes the loss. Rank 0 (replica 0's first stage) evaluates on the whole model after every
// stage has sent it its weights, and each stage of replica 0 writes its shard of a checkpoint.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "base/logging.h"
#include "loader/torch_batch.h"
#include "models/state_dict.h"
#include "parallel/planner.h"
#include "train/optimizer.h"
#include "train/run.h"

namespace reel::train::internal {

// Before anything connects: a fixed layout that cannot work is refused on every rank alike.
Status Run::CheckPipelineLayout() {
  units_ = dynamic_cast<models::VideoResNetImpl*>(module_.get());
  const int stages = c_.parallel.pipeline_stages;
  if (c_.parallel.auto_stages || stages == 1) return Status::Ok();
  const int world = o_.world.world_size;
  if (world < stages || world % stages != 0) {
    return InvalidArgumentError("parallel.pipeline_stages is " + std::to_string(stages) +
                                ", so the job needs a multiple of " + std::to_string(stages) +
                                " processes (reel train --nproc), not " + std::to_string(world));
  }
  if (units_ == nullptr) {
    return InvalidArgumentError(
        "parallel.pipeline_stages needs a model that splits into units "
        "(r3d, mc3, r2plus1d); '" +
        c_.model.name + "' does not");
  }
  if (units_->unit_count() < stages) {
    return InvalidArgumentError("model '" + c_.model.name + "' has " +
                                std::to_string(units_->unit_count()) +
                                " units (stem, residual blocks, head), fewer than "
                                "parallel.pipeline_stages (" +
                                std::to_string(stages) + ")");
  }
  return Status::Ok();
}

bool Run::StageOwns(int stage, const std::string& name) const {
  for (int u = cuts_[stage]; u < cuts_[stage + 1]; ++u) {
    if (units_->UnitOwns(u, name)) return true;
  }
  return false;
}

Run::StageState Run::StageOf(int stage) const {
  StageState state;
  for (const auto& p : module_->named_parameters()) {
    if (!StageOwns(stage, p.key())) continue;
    state.parameter_names.push_back(p.key());
    state.parameters.push_back(p.value());
  }
  for (const auto& b : module_->named_buffers()) {
    if (!StageOwns(stage, b.key())) continue;
    state.buffer_names.push_back(b.key());
    state.buffers.push_back(b.value());
  }
  return state;
}

// Rank 0 times every unit's forward and backward on a micro-batch of the configured shape (in
// eval mode, so that batch-norm statistics stay as they were).
Result<std::vector<parallel::UnitCost>> Run::ProfileUnits() {
  const int micro = std::max(1, c_.data.batch_size / c_.parallel.micro_batches);
  const torch::Tensor x = torch::full({micro, 3, c_.data.clip_frames, c_.data.size, c_.data.size},
                                      0.5F, torch::TensorOptions().device(device_));
  std::vector<std::string> names(static_cast<size_t>(units_->unit_count()));
  for (int u = 0; u < units_->unit_count(); ++u) names[u] = units_->unit_name(u);
  module_->eval();
  std::vector<parallel::UnitCost> costs = parallel::ProfileUnits(
      names, [&](int u, const at::Tensor& in) { return units_->forward_units(in, u, u + 1); },
      [&](int u) { return units_->UnitParameters(u); }, x, /*repeats=*/2);
  module_->train();
  return costs;
}

namespace {

void LogStages(const std::vector<parallel::UnitCost>& costs, const std::vector<int>& cuts) {
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    double seconds = 0;
    for (int u = cuts[s]; u < cuts[s + 1]; ++u) seconds += costs[u].seconds;
    Logger("train")->info("pipeline stage {}: units {}..{} ({} to {}), {:.0f} ms per micro-batch",
                          s, cuts[s], cuts[s + 1] - 1, costs[cuts[s]].name,
                          costs[cuts[s + 1] - 1].name, 1e3 * seconds);
  }
}

}  // namespace

// The layout as [stages, cuts...]: parallel.pipeline_stages cut where the slowest stage is
// fastest, or for auto the planner's choice (parallel/planner.h), said with its reason.
Result<std::vector<int>> Run::PlanOnLeader(double link_bytes_per_s) {
  REEL_ASSIGN_OR_RETURN(std::vector<parallel::UnitCost> costs, ProfileUnits());
  std::vector<int> cuts;
  if (!c_.parallel.auto_stages) {
    parallel::PartitionOptions options;
    options.in_flight = parallel::MicroBatchesInFlight(
        c_.parallel.pipeline_stages, c_.parallel.micro_batches, c_.parallel.schedule == "gpipe");
    REEL_ASSIGN_OR_RETURN(parallel::StagePlan plan,
                          parallel::BalanceStages(costs, c_.parallel.pipeline_stages, options));
    cuts = plan.cuts;
  } else {
    parallel::LayoutInputs in;
    in.units = costs;
    in.measured_clips = std::max(1, c_.data.batch_size / c_.parallel.micro_batches);
    in.batch = c_.data.batch_size;
    in.micro_batches = c_.parallel.micro_batches;
    in.gpipe = c_.parallel.schedule == "gpipe";
    in.world = o_.world.world_size;
    in.worker_memory = WorkerMemory();
    in.link_bytes_per_s = link_bytes_per_s;
    in.state_copies = c_.optimizer.kind == OptimizerKind::kAdamW ? 4 : 3;
    REEL_ASSIGN_OR_RETURN(parallel::LayoutChoice choice, parallel::ChooseLayout(in));
    for (const parallel::Layout& l : choice.considered) {
      Logger("train")->info(
          "parallel: auto: {} needs {} bytes a stage{}, estimated {:.1f} clips/s (compute {:.0f} "
          "ms, messages {:.0f} ms, all-reduce {:.0f} ms a step)",
          parallel::LayoutName(l), l.memory_bytes, l.fits ? "" : " (does not fit)",
          l.clips_per_second, 1e3 * l.compute_seconds, 1e3 * l.message_seconds,
          1e3 * l.allreduce_seconds);
    }
    Logger("train")->info("parallel: auto chose {}", choice.why);
    cuts = choice.chosen.cuts;
  }
  if (cuts.size() > 2) LogStages(costs, cuts);
  std::vector<int> plan = {static_cast<int>(cuts.size()) - 1};
  plan.insert(plan.end(), cuts.begin(), cuts.end());
  return plan;
}

int64_t Run::WorkerMemory() const {
  if (c_.parallel.worker_memory_mb > 0) {
    return static_cast<int64_t>(c_.parallel.worker_memory_mb * (1 << 20));
  }
  const int64_t machine =
      static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  return machine / std::max(1, o_.world.local_world_size);
}

// The layout every rank trains in: rank 0 plans it and tells the others.
Status Run::PlanStages() {
  const ParallelConfig& p = c_.parallel;
  if (!p.auto_stages) stages_ = p.pipeline_stages;
  if (!comm_ || (!p.auto_stages && stages_ == 1)) return Status::Ok();
  if (units_ == nullptr) {
    if (leader()) {
      Logger("train")->info(
          "parallel: auto chose data parallel: model '{}' does not split into "
          "units for a pipeline",
          c_.model.name);
    }
    return Status::Ok();
  }
  double link = 0;
  if (p.auto_stages) {
    REEL_ASSIGN_OR_RETURN(link, comm_->MeasureAllReduceBandwidth());
  }
  const int most = std::min(o_.world.world_size, units_->unit_count());
  torch::Tensor plan = torch::full({most + 2}, -1, torch::kLong);
  Status planned = Status::Ok();
  if (leader()) {
    Result<std::vector<int>> made = PlanOnLeader(link);
    planned = made.status();
    for (size_t i = 0; made.ok() && i < made->size(); ++i) plan[i] = (*made)[i];
    if (!made.ok()) plan[1] = static_cast<int64_t>(made.status().code());
  }
  REEL_RETURN_IF_ERROR(comm_->Broadcast({plan}, 0, "the job's layout"));
  REEL_RETURN_IF_ERROR(planned);
  if (plan[0].item<int64_t>() < 1) {  // the same kind of error as rank 0's, so the job's exit code
    return Status(static_cast<StatusCode>(plan[1].item<int64_t>()),
                  "rank 0 could not plan the job's layout (its log says why)");
  }
  stages_ = static_cast<int>(plan[0].item<int64_t>());
  if (stages_ == 1) return Status::Ok();
  cuts_.assign(plan.data_ptr<int64_t>() + 1, plan.data_ptr<int64_t>() + 2 + stages_);
  return MakePipeline();
}

// This rank's groups, stage parameters and PipelineStage, once cuts_ is known.
Status Run::MakePipeline() {
  REEL_ASSIGN_OR_RETURN(parallel::Mesh mesh, parallel::MakeMesh(*comm_, stages_));
  mesh_.emplace(std::move(mesh));
  params_ = StageOf(stage()).parameters;
  parallel::PipelineOptions options;
  options.micro_batches = std::min(c_.parallel.micro_batches, c_.data.batch_size);
  REEL_ASSIGN_OR_RETURN(options.schedule, parallel::ParsePipelineSchedule(c_.parallel.schedule));
  const int begin = cuts_[stage()], end = cuts_[stage() + 1];
  auto forward = [this, begin, end](const at::Tensor& x) {
    AutocastGuard autocast(precision_.autocast, precision_.dtype, precision_.device_type);
    return units_->forward_units(x, begin, end);
  };
  auto loss = [this](const at::Tensor& logits, const at::Tensor& labels) {
    torch::Tensor l = torch::nn::functional::cross_entropy(
        logits.to(torch::kFloat), labels,
        torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(c_.label_smoothing));
    return scaler_->ScaleLoss(l / c_.grad_accum);
  };
  REEL_ASSIGN_OR_RETURN(
      parallel::PipelineStage made,
      parallel::PipelineStage::Make(mesh_->pipeline.get(), options, forward, loss));
  pipeline_.emplace(std::move(made));
  return Status::Ok();
}

// Rank 0 alone knows when an epoch ended while it fetched a step's batches; every rank joins the
// evaluation that follows.
Result<bool> Run::AgreeOnEval() {
  torch::Tensor flag = torch::full({1}, eval_pending_ ? 1 : 0, torch::kLong);
  eval_pending_ = false;
  REEL_RETURN_IF_ERROR(
      comm_->Broadcast({flag}, 0, "whether to evaluate before step " + std::to_string(step_ + 1)));
  return flag.item<int64_t>() != 0;
}

// Forward and backward of a step's micro-batches through the pipeline, then the gradients
// averaged over the replicas; the step's mean loss (on the last stage; 0 on the others).
Result<double> Run::PipelineGradients() {
  std::vector<loader::TensorBatch> batches;
  for (int micro = 0; reads_data() && micro < c_.grad_accum; ++micro) {
    REEL_ASSIGN_OR_RETURN(loader::Batch batch, NextBatch());
    LogSamples(batch);
    window_.wait += batch.input_wait_s;
    samples_ += batch.shape[0] * replicas();
    window_.clips += batch.shape[0] * replicas();
    batches.push_back(loader::ToTensors(std::move(batch)));
  }
  REEL_ASSIGN_OR_RETURN(bool evaluate, AgreeOnEval());
  if (evaluate) REEL_RETURN_IF_ERROR(EvaluateAndReport(false));
  const double scale = scaler_->enabled() ? scaler_->state().scale : 1.0;
  double step_loss = 0;
  for (int micro = 0; micro < c_.grad_accum; ++micro) {
    if (!buffers_.empty()) {
      REEL_RETURN_IF_ERROR(mesh_->data->Broadcast(
          buffers_, 0, "buffers from replica 0 before step " + std::to_string(step_ + 1)));
    }
    torch::Tensor input, labels;
    if (reads_data()) {
      input = batches[micro].clips.to(device_, /*non_blocking=*/true);
      labels = batches[micro].labels;
    }
    REEL_ASSIGN_OR_RETURN(labels, pipeline_->ShareTargets(labels));
    if (labels.defined()) labels = labels.to(device_);
    REEL_ASSIGN_OR_RETURN(parallel::PipelineStepResult r, pipeline_->Step(input, labels));
    step_loss += r.loss / scale;
  }
  if (replicas() > 1) REEL_RETURN_IF_ERROR(parallel::AverageGradients(*mesh_->data, params_));
  return step_loss;
}

// Only the last stages see the loss and each stage its own gradients: the whole pipeline skips
// or fails a step together.
Status Run::AgreeOnFinite(bool* loss_finite, bool* grads_finite) {
  torch::Tensor bad = torch::tensor({*loss_finite ? 0L : 1L, *grads_finite ? 0L : 1L});
  REEL_RETURN_IF_ERROR(
      comm_->AllReduce(bad, "finite losses and gradients at step " + std::to_string(step_ + 1)));
  *loss_finite = bad[0].item<int64_t>() == 0;
  *grads_finite = bad[1].item<int64_t>() == 0;
  return Status::Ok();
}

void Run::ReleaseOtherStages() {
  if (leader()) return;
  torch::NoGradGuard no_grad;
  int64_t kept = 0, all = 0;
  for (auto& p : module_->named_parameters()) {
    all += static_cast<int64_t>(p.value().nbytes());
    if (StageOwns(stage(), p.key())) {
      kept += static_cast<int64_t>(p.value().nbytes());
    } else {
      p.value().set_data(torch::empty({0}, p.value().options()));
    }
  }
  Logger("train")->info(
      "rank {}: stage {} keeps {:.2f} of the model's {:.2f} MB of weights ({} of {} bytes)",
      o_.world.rank, stage(), static_cast<double>(kept) / 1e6, static_cast<double>(all) / 1e6, kept,
      all);
}

// Replica 0's stages send their weights and buffers to its first stage, rank 0, which holds the
// whole model; the other replicas have nothing to do.
Status Run::GatherModel() {
  if (replica() != 0) return Status::Ok();
  constexpr int kTagBase = 1 << 20;  // above the pipeline's own tags
  for (int s = 1; s < stages_; ++s) {
    if (stage() != 0 && stage() != s) continue;
    StageState state = StageOf(s);
    state.parameters.insert(state.parameters.end(), state.buffers.begin(), state.buffers.end());
    const std::string what = "stage " + std::to_string(s) + "'s weights for evaluation";
    for (size_t i = 0; i < state.parameters.size(); ++i) {
      torch::Tensor t = state.parameters[i].detach();
      const int tag = kTagBase + static_cast<int>(i);
      REEL_ASSIGN_OR_RETURN(auto pending, stage() == 0
                                              ? mesh_->pipeline->StartRecv(t, s, tag, what)
                                              : mesh_->pipeline->StartSend(t, 0, tag, what));
      REEL_RETURN_IF_ERROR(mesh_->pipeline->Wait(pending));
    }
  }
  return Status::Ok();
}

// Replica 0's stages write their shards in parallel; once every rank knows they all did, rank 0
// writes the rest and the manifest that makes the checkpoint whole.
Status Run::SaveShardedCheckpoint() {
  const auto start = Clock::now();
  const int stages = stages_;
  Status mine = Status::Ok();
  if (replica() == 0) {
    // This stage's tensors only: a stage need not copy the whole model to write its part.
    const StageState owned = StageOf(stage());
    models::SafetensorsFile model;
    for (size_t i = 0; i < owned.parameters.size(); ++i) {
      model.tensors[owned.parameter_names[i]] = models::ToTensorBytes(owned.parameters[i]);
    }
    for (size_t i = 0; i < owned.buffers.size(); ++i) {
      model.tensors[owned.buffer_names[i]] = models::ToTensorBytes(owned.buffers[i]);
    }
    models::SafetensorsFile state;
    SaveOptimizerState(*optimizer_, *module_, "optimizer.", &state);
    mine = checkpoints_->SaveShard(step_, stage(), stages, model, state);
  }
  torch::Tensor failed = torch::full({1}, mine.ok() ? 0 : 1, torch::kLong);
  const std::string what = "checkpoint step " + std::to_string(step_);
  REEL_RETURN_IF_ERROR(comm_->AllReduce(failed, "the shards of " + what));
  REEL_RETURN_IF_ERROR(mine);
  if (failed.item<int64_t>() > 0) {
    return UnavailableError("a stage could not write its shard of " + what + " (its log says why)");
  }
  if (!leader()) return WaitForLeader("rank 0 writing " + what);
  REEL_RETURN_IF_ERROR(checkpoints_->CommitShards(CheckpointState(), stages, c_.checkpoint_keep));
  WriteLine(
      {{"event", "checkpoint"}, {"step", step_}, {"seconds", Seconds(start)}, {"shards", stages}});
  Logger("train")->info("checkpoint at step {} written to {}{} in {} shards", step_,
                        checkpoints_->uri(), CheckpointStore::DirName(step_), stages);
  return WaitForLeader("rank 0 writing " + what);
}

}  // namespace reel::train::internal
