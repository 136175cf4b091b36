#include "train/trainer.h"

#include <ATen/Context.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "base/files.h"
#include "base/logging.h"
#include "base/progress.h"
#include "loader/loader.h"
#include "loader/torch_batch.h"
#include "models/model_zoo.h"
#include "models/state_dict.h"
#include "parallel/comm.h"
#include "parallel/reducer.h"
#include "storage/open.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/optimizer.h"
#include "train/run.h"
#include "train/schedule.h"
#include "train/trainer_state.h"

namespace reel::train {
namespace internal {

Status Run::Setup() {
  if (c_.threads > 0) torch::set_num_threads(c_.threads);
  REEL_ASSIGN_OR_RETURN(device_, ResolveDevice(c_.device, o_.world.local_rank));
  REEL_ASSIGN_OR_RETURN(precision_, ResolvePrecision(c_.amp, device_));
  torch::manual_seed(c_.seed);
  REEL_ASSIGN_OR_RETURN(store_, OpenDataset(c_));
  REEL_ASSIGN_OR_RETURN(models::ModelSpec spec, ModelForDataset(c_, *store_));
  REEL_ASSIGN_OR_RETURN(model_, models::BuildModel(spec));
  module_ = model_.ptr();
  module_->to(device_);
  module_->train();
  for (auto& p : module_->parameters()) params_.push_back(p);
  scaler_ = std::make_unique<GradScaler>(precision_.scale_loss);
  REEL_RETURN_IF_ERROR(CheckPipelineLayout());
  REEL_RETURN_IF_ERROR(CheckPsLayout());
  REEL_ASSIGN_OR_RETURN(auto checkpoints, CheckpointStore::Open(c_.checkpoint_uri));
  checkpoints_.emplace(std::move(checkpoints));
  if (!leader()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(c_.run_dir, ec);
  if (ec) return InternalError("cannot create run_dir '" + c_.run_dir + "': " + ec.message());
  return Status::Ok();
}

// After PlanStages: pipelines are the data-parallel unit, each replica's stages share its part
// of the data.
Status Run::OpenLoader() {
  // A parameter server reads no data, but needs the schedule: it opens worker 0's part.
  auto opened =
      loader::Loader::Open(*store_, c_.TrainLoaderOptions(replicas(), ps_server() ? 0 : replica()));
  if (!opened.ok()) {
    return Status(opened.status().code(), "data (split '" + c_.data.train_split + "', batch_size " +
                                              std::to_string(c_.data.batch_size) +
                                              "): " + opened.status().message());
  }
  loader_ = std::move(*opened);
  const int classes = static_cast<int>(loader_->class_names().size());
  if (classes != c_.model.num_classes) {
    return InvalidArgumentError("model.num_classes is " + std::to_string(c_.model.num_classes) +
                                " but " + c_.data.dataset + " has " + std::to_string(classes) +
                                " classes");
  }
  const int64_t micro_per_epoch = static_cast<int64_t>(loader_->batches_per_epoch());
  if (micro_per_epoch < c_.grad_accum) {
    return InvalidArgumentError("split '" + c_.data.train_split + "' gives " +
                                std::to_string(micro_per_epoch) + " batches of " +
                                std::to_string(c_.data.batch_size) +
                                " per epoch, fewer than train.grad_accum (" +
                                std::to_string(c_.grad_accum) + "); lower data.batch_size");
  }
  const int64_t steps_per_epoch = micro_per_epoch / c_.grad_accum;
  schedule_.base_lr = c_.optimizer.lr;
  schedule_.min_lr = c_.min_lr;
  schedule_.total_steps =
      c_.max_steps > 0 ? c_.max_steps : c_.epochs * micro_per_epoch / c_.grad_accum;
  schedule_.warmup_steps =
      std::min(schedule_.total_steps,
               c_.warmup_steps >= 0 ? c_.warmup_steps : c_.warmup_epochs * steps_per_epoch);
  return ValidateSchedule(schedule_);
}

// After PlanStages: a stage's optimiser holds only its parameters.
Status Run::MakeStepOptimizer() {
  optimizer_ = MakeOptimizer(params_, c_.optimizer);
  return Status::Ok();
}

// Rank 0 picks the checkpoint (or refuses to start) and tells the others: -1 = start fresh,
// -2 = rank 0 failed. Ranks then load the same step.
Status Run::WaitForLeader(const std::string& what) {
  if (!comm_) return Status::Ok();
  const auto patience =
      std::max(std::chrono::milliseconds(static_cast<int64_t>(c_.dist.timeout_s * 1000)),
               std::chrono::milliseconds(3600 * 1000));
  return comm_->FollowLeader(what, patience);
}

Status Run::ConnectWorld() {
  if (!o_.world.distributed() || ps()) return Status::Ok();  // parameter servers: no group
  parallel::CommOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(c_.dist.timeout_s * 1000));
  options.connect_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(c_.dist.connect_timeout_s * 1000));
  options.interface_name = c_.dist.iface;
  options.cuda = device_.is_cuda();
  REEL_ASSIGN_OR_RETURN(comm_, parallel::Comm::Connect(o_.world, options));
  return Status::Ok();
}

// Rank 0 evaluates alone while the other ranks wait in a barrier, so the cores of those on its
// host are free: it evaluates on them too (with `threads` set; 0 already means every core).
int Run::EvalThreads() const {
  if (c_.threads <= 0 || !device_.is_cpu()) return 0;
  return c_.threads * o_.world.local_world_size;
}

Status Run::EvaluateAndReport(bool final_eval) {
  if (pipeline_) REEL_RETURN_IF_ERROR(GatherModel());
  if (!leader()) return WaitForLeader("rank 0 evaluating at step " + std::to_string(step_));
  auto start = Clock::now();
  if (EvalThreads() > 0) torch::set_num_threads(EvalThreads());
  Result<EvalReport> evaluated =
      Evaluate(model_, *module_, device_, precision_, *store_,
               c_.EvalLoaderOptions(c_.data.val_split), c_.model.num_classes);
  if (EvalThreads() > 0) torch::set_num_threads(c_.threads);
  REEL_ASSIGN_OR_RETURN(EvalReport report, std::move(evaluated));
  nlohmann::json line = nlohmann::json::parse(report.ToJson());
  line["event"] = final_eval ? "final_eval" : "eval";
  line["step"] = step_;
  line["epoch"] = static_cast<int64_t>(loader_->state().epoch);
  line["split"] = c_.data.val_split;
  line["seconds"] = Seconds(start);
  WriteLine(std::move(line));  // an evaluation's line holds every video's verdict: not copied
  Logger("train")->info("step {}: {} top-1 {:.3f}, top-5 {:.3f}, video top-1 {:.3f} ({} clips)",
                        step_, c_.data.val_split, report.top1, report.top5, report.video_top1,
                        report.clips);
  if (final_eval) {
    std::ofstream out(c_.run_dir + "/eval.json", std::ios::trunc);
    out << report.ToJson() << "\n";
    if (!out) return InternalError("cannot write " + c_.run_dir + "/eval.json");
  }
  last_eval_ = report;
  REEL_RETURN_IF_ERROR(KeepIfBest(report));
  return WaitForLeader("rank 0 evaluating at step " + std::to_string(step_));
}

// One line per micro-batch: the step it belongs to, its epoch and clips, and which attempt wrote
// it (a resumed run redoes the steps after its checkpoint; the later attempt's lines count).
void Run::LogSamples(const loader::Batch& batch) {
  if (!samples_log_.is_open()) return;
  const nlohmann::json line = {{"step", step_ + 1},
                               {"epoch", loader_->state().epoch},
                               {"world_size", o_.world.world_size},
                               {"resumed_from", resumed_from_},
                               {"keys", batch.keys}};
  samples_log_ << line.dump() << "\n";
  samples_log_.flush();
}

// The next training micro-batch, moving to the next epoch (after its evaluation) at the end of one.
Result<loader::Batch> Run::NextBatch() {
  REEL_ASSIGN_OR_RETURN(auto batch, loader_->Next());
  if (batch) return std::move(*batch);
  const int64_t epoch = loader_->state().epoch;
  if (c_.eval_every_epochs > 0 && (epoch + 1) % c_.eval_every_epochs == 0 &&
      last_eval_epoch_ < epoch) {
    last_eval_epoch_ = epoch;
    if (pipeline_) {
      eval_pending_ = true;  // the other stages join it before the step (AgreeOnEval)
    } else {
      REEL_RETURN_IF_ERROR(EvaluateAndReport(false));
    }
  }
  REEL_RETURN_IF_ERROR(loader_->Start({c_.seed, epoch + 1, 0}));
  REEL_ASSIGN_OR_RETURN(batch, loader_->Next());
  if (!batch) return InternalError("the loader gave an empty epoch");
  return std::move(*batch);
}

void Run::WriteLine(nlohmann::json line) {
  if (!metrics_.is_open()) return;
  // Wall time (Unix seconds) on every line, so a console can plot against time as well as steps.
  line["time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  metrics_ << line.dump() << "\n";
  metrics_.flush();
}

Result<TrainResult> Run::Go() {
  const auto start = Clock::now();
  REEL_RETURN_IF_ERROR(Setup());
  REEL_RETURN_IF_ERROR(ConnectWorld());
  REEL_RETURN_IF_ERROR(PlanStages());
  REEL_RETURN_IF_ERROR(OpenLoader());
  if (ps_server()) return ServeShard(start);
  REEL_RETURN_IF_ERROR(MakeStepOptimizer());
  REEL_RETURN_IF_ERROR(OpenMetrics());
  REEL_RETURN_IF_ERROR(ps() ? ResumeFromServers() : Resume());
  REEL_RETURN_IF_ERROR(StartReplicas());
  LogPlan();
  Progress progress("train", static_cast<uint64_t>(schedule_.total_steps), Progress::Unit::kItems,
                    o_.progress && leader());
  progress.SetSecondaryName("clips");
  progress.Add(static_cast<uint64_t>(step_));
  const int64_t stop_at = o_.stop_after_steps > 0
                              ? std::min(schedule_.total_steps, step_ + o_.stop_after_steps)
                              : schedule_.total_steps;
  window_ = LogWindow{};
  while (step_ < stop_at) {
    REEL_RETURN_IF_ERROR(TrainStep());
    progress.Add(1);
    progress.AddSecondary(static_cast<uint64_t>(ClipsPerStep()));
    if (step_ % c_.log_every == 0 || step_ == stop_at) REEL_RETURN_IF_ERROR(LogAndResetWindow());
    const bool end = step_ == schedule_.total_steps;
    if (!end && c_.checkpoint_every_steps > 0 && step_ % c_.checkpoint_every_steps == 0) {
      REEL_RETURN_IF_ERROR(SaveCheckpoint());
    }
    REEL_ASSIGN_OR_RETURN(preempted_, StopAgreed());
    if (preempted_ && !end) {
      if (leader()) Logger("train")->warn("preempted after step {}: writing a checkpoint", step_);
      break;
    }
  }
  progress.Finish();
  return Finish(start);
}

// Any rank asked to stop stops them all at this step: the others would otherwise wait for it in
// the next step's all-reduce until the watchdog gave up.
Result<bool> Run::StopAgreed() {
  if (!o_.should_stop) return false;
  const bool local = o_.should_stop();
  if (!comm_) return local;
  torch::Tensor flag = torch::full({1}, local ? 1.0F : 0.0F, torch::kFloat32);
  REEL_RETURN_IF_ERROR(comm_->AllReduce(flag, "the stop flag after step " + std::to_string(step_)));
  return flag.item<float>() > 0;
}

Status Run::OpenMetrics() {
  if (c_.log_samples) {
    const std::string path =
        c_.run_dir + "/samples-rank" + std::to_string(o_.world.rank) + ".jsonl";
    std::error_code ec;
    std::filesystem::create_directories(c_.run_dir, ec);
    samples_log_.open(path, std::ios::app);
    if (!samples_log_) return InternalError("cannot open " + path + " for appending");
  }
  if (!leader()) return Status::Ok();
  metrics_.open(c_.run_dir + "/metrics.jsonl", std::ios::app);
  if (!metrics_) return InternalError("cannot open " + c_.run_dir + "/metrics.jsonl for appending");
  // The run's whole config beside its metrics, for whoever reads the run folder (reel ui).
  return WriteFileAtomically(c_.run_dir + "/config.yaml", c_.source_text);
}

// Every rank starts from rank 0's weights and buffers (the same seed makes them equal already; a
// resumed rank 0 is the reference either way), and averages gradients through the reducer.
Status Run::StartReplicas() {
  if (!comm_) return Status::Ok();
  std::vector<torch::Tensor> state = module_->parameters();
  for (auto& b : module_->buffers()) {
    state.push_back(b);
    buffers_.push_back(b);
  }
  REEL_RETURN_IF_ERROR(comm_->Broadcast(state, 0, "parameters and buffers from rank 0"));
  // A pipeline stage broadcasts only its buffers, from replica 0 over its data group, and
  // averages its gradients in PipelineGradients, without the reducer.
  if (pipeline_) {
    buffers_.clear();
    if (c_.dist.broadcast_buffers && replicas() > 1) buffers_ = StageOf(stage()).buffers;
    ReleaseOtherStages();
    return Status::Ok();
  }
  if (!c_.dist.broadcast_buffers) buffers_.clear();
  parallel::ReducerOptions reducer;
  reducer.bucket_cap_bytes = static_cast<int64_t>(c_.dist.bucket_cap_mb * 1024 * 1024);
  reducer.first_bucket_bytes = static_cast<int64_t>(c_.dist.first_bucket_mb * 1024 * 1024);
  REEL_ASSIGN_OR_RETURN(reducer.compression, parallel::ParseGradCompression(c_.dist.compression));
  std::vector<parallel::Reducer::NamedParameter> named;
  for (auto& p : module_->named_parameters()) named.emplace_back(p.key(), p.value());
  REEL_ASSIGN_OR_RETURN(reducer_, parallel::Reducer::Create(named, *comm_, reducer));
  return Status::Ok();
}

void Run::LogPlan() const {
  if (!leader()) return;
  const int world = o_.world.world_size;
  std::string layout;
  if (world > 1 && comm_) {
    layout = " x " + std::to_string(world) + " processes (" + comm_->backend() + ")";
  }
  if (ps()) {
    layout =
        " x " + std::to_string(ps_workers()) + " workers with " +
        std::to_string(c_.parallel.parameter_servers) + " parameter servers (" + c_.parallel.sync +
        (c_.parallel.sync == "ssp" ? ", staleness " + std::to_string(c_.parallel.staleness) : "") +
        ")";
  }
  if (pipeline_) {
    layout += ": " + std::to_string(replicas()) + (replicas() == 1 ? " replica" : " replicas") +
              " of " + std::to_string(stages_) + " pipeline stages (" + c_.parallel.schedule +
              ", " + std::to_string(std::min(c_.parallel.micro_batches, c_.data.batch_size)) +
              " micro-batches)";
  }
  Logger("train")->info(
      "training {} on {} for {} steps ({} warmup), {} clips per step, on {}{}, {}", c_.model.name,
      c_.data.dataset, schedule_.total_steps, schedule_.warmup_steps, ClipsPerStep(), device_.str(),
      layout, PrecisionName(precision_));
}

int64_t Run::ClipsPerStep() const {
  return static_cast<int64_t>(c_.data.batch_size) * c_.grad_accum * replicas();
}

// One optimiser step: forward and backward over grad_accum micro-batches, then the update (the
// parameter servers': this step's weights are pulled first and its gradients pushed).
Status Run::TrainStep() {
  if (ps_) REEL_RETURN_IF_ERROR(ps_->Pull(step_));
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();  // set to none: no memset
  REEL_ASSIGN_OR_RETURN(double step_loss, pipeline_ ? PipelineGradients() : AccumulateGradients());
  if (reducer_) REEL_RETURN_IF_ERROR(reducer_->Finish());
  bool finite = scaler_->Unscale(params_);
  bool loss_finite = std::isfinite(step_loss);
  if (pipeline_) REEL_RETURN_IF_ERROR(AgreeOnFinite(&loss_finite, &finite));
  if (!loss_finite && !scaler_->enabled()) {
    return InternalError("the loss is " + std::to_string(step_loss) + " at step " +
                         std::to_string(step_ + 1) +
                         ": training diverged (lower optimizer.lr or set train.clip_grad_norm)");
  }
  double norm = 0;
  if (finite && c_.clip_grad_norm > 0) {
    REEL_ASSIGN_OR_RETURN(norm, ClipGradients());
  }
  window_.lr = LearningRate(schedule_, step_);
  if (ps_) {
    REEL_RETURN_IF_ERROR(ps_->Push(step_, finite));
  } else {
    SetLearningRate(*optimizer_, window_.lr);
    if (finite) optimizer_->step();
  }
  if (!finite) ++skipped_steps_;
  scaler_->Update(finite);
  ++step_;
  window_.loss += step_loss;
  window_.norm += norm;
  ++window_.steps;
  return Status::Ok();
}

// Clips the gradients of the whole model (across the pipeline's stages) to train.clip_grad_norm;
// the norm before.
Result<double> Run::ClipGradients() {
  if (pipeline_) return parallel::ClipGradNormAcross(*mesh_->pipeline, params_, c_.clip_grad_norm);
  return torch::nn::utils::clip_grad_norm_(params_, c_.clip_grad_norm);
}

// Forward and backward of every micro-batch of a step; the step's mean loss.
Result<double> Run::AccumulateGradients() {
  const int world = replicas();
  double step_loss = 0;
  for (int micro = 0; micro < c_.grad_accum; ++micro) {
    REEL_ASSIGN_OR_RETURN(loader::Batch batch, NextBatch());
    LogSamples(batch);
    window_.wait += batch.input_wait_s;
    const int64_t clips = batch.shape[0];
    loader::TensorBatch tensors = loader::ToTensors(std::move(batch));
    torch::Tensor input = tensors.clips.to(device_, /*non_blocking=*/true);
    torch::Tensor labels = tensors.labels.to(device_, /*non_blocking=*/true);
    if (!buffers_.empty()) {
      REEL_RETURN_IF_ERROR(comm_->Broadcast(
          buffers_, 0, "buffers from rank 0 before step " + std::to_string(step_ + 1)));
    }
    if (reducer_) reducer_->set_sync(micro == c_.grad_accum - 1);
    torch::Tensor logits;
    {
      AutocastGuard autocast(precision_.autocast, precision_.dtype, precision_.device_type);
      logits = model_.forward(input);
    }
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        logits.to(torch::kFloat), labels,
        torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(c_.label_smoothing));
    scaler_->ScaleLoss(loss / c_.grad_accum).backward();
    step_loss += loss.item<double>() / c_.grad_accum;
    samples_ += clips * world;
    window_.clips += clips * world;
  }
  return step_loss;
}

// The logging window's means as one metrics line; the loss is the mean over ranks, each rank's
// in rank_losses (one small all-reduce), so the log shows how far ranks differ.
Status Run::LogAndResetWindow() {
  StepMetrics m;
  m.step = step_;
  m.epoch = loader_->state().epoch;
  m.loss = window_.loss / window_.steps;
  if (comm_) {
    const int world = o_.world.world_size;
    torch::Tensor losses = torch::zeros({world}, torch::kFloat64);
    losses[o_.world.rank] = m.loss;
    REEL_RETURN_IF_ERROR(
        comm_->AllReduce(losses, "losses for the log at step " + std::to_string(step_)));
    if (pipeline_) {  // each replica's, from its last stage (rank = replica * stages + stage)
      losses = losses.view({replicas(), stages_}).select(1, stages_ - 1).contiguous();
    }
    m.rank_losses.assign(losses.data_ptr<double>(), losses.data_ptr<double>() + losses.numel());
    m.loss = losses.mean().item<double>();
  }
  m.lr = window_.lr;
  const double elapsed = Seconds(window_.start);
  m.clips_per_s = elapsed > 0 ? window_.clips / elapsed : 0;
  m.input_wait_s = window_.wait;
  m.input_wait_share = elapsed > 0 ? window_.wait / elapsed : 0;
  m.grad_norm = window_.norm / window_.steps;
  m.skipped_steps = skipped_steps_;
  nlohmann::json line = {{"step", m.step},
                         {"epoch", m.epoch},
                         {"loss", m.loss},
                         {"lr", m.lr},
                         {"clips_per_s", m.clips_per_s},
                         {"input_wait_s", m.input_wait_s},
                         {"input_wait_share", m.input_wait_share},
                         {"grad_norm", m.grad_norm},
                         {"skipped_steps", m.skipped_steps},
                         {"samples", samples_}};
  if (!m.rank_losses.empty()) line["rank_losses"] = m.rank_losses;
  if (ps_) AddPsMetrics(&line);
  WriteLine(std::move(line));
  if (o_.on_log) o_.on_log(m);
  window_ = LogWindow{};
  return Status::Ok();
}

// The last checkpoint and, for a finished run, the final evaluation.
Result<TrainResult> Run::Finish(Clock::time_point start) {
  TrainResult result;
  result.finished = step_ == schedule_.total_steps;
  result.preempted = preempted_ && !result.finished;
  if (ps_ && result.finished) {  // the last update's weights, then let the servers go
    REEL_RETURN_IF_ERROR(ps_->Pull(step_));
    REEL_RETURN_IF_ERROR(ps_->Done());
  }
  if (ps_ && !leader()) {  // the servers hold the state; worker 0 writes the checkpoint
    result.steps = step_;
    result.samples = samples_;
    result.seconds = Seconds(start);
    return result;
  }
  if (result.finished || step_ > 0) REEL_RETURN_IF_ERROR(SaveCheckpoint());
  if (result.finished) {
    REEL_RETURN_IF_ERROR(EvaluateAndReport(true));
    result.eval = last_eval_;
    if (leader() && !c_.registry.model.empty()) REEL_RETURN_IF_ERROR(RegisterModel(&result));
  }
  result.steps = step_;
  result.resumed_from = resumed_from_;
  result.samples = samples_;
  result.seconds = Seconds(start);
  return result;
}

}  // namespace internal

Result<TrainResult> RunTraining(const TrainConfig& config, const TrainOptions& options) {
  try {
    internal::Run run(config, options);
    return run.Go();
  } catch (const c10::Error& e) {
    return InternalError(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InternalError(std::string("training: ") + e.what());
  }
}

}  // namespace reel::train
