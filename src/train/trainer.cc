#include "train/trainer.h"

#include <ATen/Context.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/logging.h"
#include "base/progress.h"
#include "dist/comm.h"
#include "dist/reducer.h"
#include "loader/loader.h"
#include "loader/torch_batch.h"
#include "models/model_zoo.h"
#include "models/state_dict.h"
#include "storage/open.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/trainer_state.h"

namespace reel::train {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The device the config asks for. InvalidArgument when it asks for CUDA that is not there.
// In a data-parallel job on CUDA, "auto" and "cuda" mean the GPU of this process's local rank.
Result<torch::Device> ResolveDevice(const std::string& name, int local_rank = 0) {
  const bool cuda = torch::cuda::is_available();
  const int local_gpu =
      cuda ? local_rank % std::max<int>(1, static_cast<int>(torch::cuda::device_count())) : 0;
  if (name == "auto")
    return cuda ? torch::Device(torch::kCUDA, local_gpu) : torch::Device(torch::kCPU);
  if (name == "cuda" && cuda) return torch::Device(torch::kCUDA, local_gpu);
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (!cuda) {
    return InvalidArgumentError(
        "device '" + name +
        "' asked for, but this LibTorch sees no CUDA device (use device: cpu or auto)");
  }
  try {
    torch::Device device(name);
    if (device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count())) {
      return InvalidArgumentError("device '" + name + "': only " +
                                  std::to_string(torch::cuda::device_count()) +
                                  " CUDA devices are present");
    }
    return device;
  } catch (const c10::Error&) {
    return InvalidArgumentError("device '" + name +
                                "' is not a device name (expected cpu, cuda or cuda:N)");
  }
}

struct Precision {
  bool autocast = false;
  torch::ScalarType dtype = torch::kFloat;
  bool scale_loss = false;
};

Result<Precision> ResolvePrecision(AmpMode mode, const torch::Device& device) {
  Precision p;
  if (mode == AmpMode::kOff || (mode == AmpMode::kAuto && !device.is_cuda())) return p;
  if (!device.is_cuda()) {
    return InvalidArgumentError(
        "train.amp: mixed precision needs a CUDA device; this run is on the CPU "
        "(use amp: auto or off)");
  }
  p.autocast = true;
  p.dtype = mode == AmpMode::kBf16 ? torch::kBFloat16 : torch::kHalf;
  p.scale_loss = p.dtype == torch::kHalf;  // bf16 has fp32's range: no scaling needed
  return p;
}

// Clip keys are "<video>_cNNN"; clips of one video share the part before the suffix.
std::string VideoKeyOf(const std::string& clip_key) {
  size_t at = clip_key.rfind("_c");
  if (at == std::string::npos || at + 2 == clip_key.size()) return clip_key;
  for (size_t i = at + 2; i < clip_key.size(); ++i) {
    if (clip_key[i] < '0' || clip_key[i] > '9') return clip_key;
  }
  return clip_key.substr(0, at);
}

Result<std::unique_ptr<storage::ObjectStore>> OpenDataset(const TrainConfig& config) {
  storage::StoreOpenOptions open;
  open.cache_directory = config.data.cache_dir;
  return storage::OpenStore(config.data.dataset, open);
}

// Clip-level and video-level metrics of `model` on one split. The loader pads the last batch
// with repeats; those are recognised by key and counted once.
Result<EvalReport> Evaluate(torch::nn::AnyModule& model, torch::nn::Module& module,
                            const torch::Device& device, const Precision& precision,
                            storage::ObjectStore& store, const loader::LoaderOptions& options,
                            int num_classes) {
  REEL_ASSIGN_OR_RETURN(auto loader, loader::Loader::Open(store, options));
  REEL_RETURN_IF_ERROR(loader->Start({options.plan.seed, 0, 0}));
  if (static_cast<int>(loader->class_names().size()) != num_classes) {
    return InvalidArgumentError("split '" + options.split + "' has " +
                                std::to_string(loader->class_names().size()) +
                                " classes but the model has " + std::to_string(num_classes));
  }
  const bool was_training = module.is_training();
  module.eval();
  torch::NoGradGuard no_grad;
  Evaluator evaluator(num_classes);
  std::set<std::string> seen;
  const int per_sample = options.clip.clips_per_video;
  while (true) {
    REEL_ASSIGN_OR_RETURN(auto batch, loader->Next());
    if (!batch) break;
    std::vector<std::string> keys =
        std::move(batch->keys);  // ToTensors needs only pixels and labels
    std::vector<int> labels = batch->labels;
    loader::TensorBatch tensors = loader::ToTensors(std::move(*batch));
    torch::Tensor logits;
    {
      AutocastGuard autocast(precision.autocast, precision.dtype);
      logits = model.forward(tensors.clips.to(device, /*non_blocking=*/true));
    }
    torch::Tensor scores = logits.to(torch::kFloat).softmax(1).to(torch::kCPU).contiguous();
    const float* s = scores.data_ptr<float>();
    for (size_t i = 0; i * per_sample < keys.size(); ++i) {
      const std::string& key = keys[i * per_sample];
      if (!seen.insert(key).second) continue;
      for (int c = 0; c < per_sample; ++c) {
        size_t row = i * per_sample + c;
        std::vector<float> clip_scores(s + row * num_classes, s + (row + 1) * num_classes);
        REEL_RETURN_IF_ERROR(evaluator.Add(clip_scores, labels[row], VideoKeyOf(key)));
      }
    }
  }
  if (was_training) module.train();
  EvalReport report = evaluator.Report();
  report.class_names = loader->class_names();
  return report;
}

Status SetRngState(const torch::Device& device, const models::SafetensorsFile& state,
                   const std::string& name) {
  auto it = state.tensors.find(name);
  if (it == state.tensors.end()) return Status::Ok();  // written by a run without that device
  REEL_ASSIGN_OR_RETURN(torch::Tensor bytes,
                        models::FromTensorBytes(it->second, "checkpoint '" + name + "'"));
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  try {
    generator.set_state(bytes);
  } catch (const c10::Error& e) {
    return DataLossError("checkpoint '" + name +
                         "' is not a generator state: " + e.what_without_backtrace());
  }
  return Status::Ok();
}

torch::Tensor GetRngState(const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

// Everything that lives for one training run.
class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options) : c_(config), o_(options) {}

  Result<TrainResult> Go();

 private:
  Status Setup();
  Status Resume();
  Status SaveCheckpoint();
  Status EvaluateAndReport(bool final_eval);
  Result<loader::Batch> NextBatch();
  void WriteLine(const nlohmann::json& line);
  bool leader() const { return o_.world.rank == 0; }
  Status ConnectWorld();
  Status WaitForLeader(const std::string& what);
  Result<int64_t> AgreeOnResumeStep();

  const TrainConfig& c_;
  const TrainOptions& o_;
  torch::Device device_{torch::kCPU};
  Precision precision_;
  torch::nn::AnyModule model_;
  std::shared_ptr<torch::nn::Module> module_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<storage::ObjectStore> store_;
  std::unique_ptr<loader::Loader> loader_;
  std::optional<CheckpointStore> checkpoints_;
  std::unique_ptr<dist::Comm> comm_;
  std::unique_ptr<dist::Reducer> reducer_;
  std::vector<torch::Tensor> buffers_;  // broadcast from rank 0 before each forward
  ScheduleOptions schedule_;
  std::ofstream metrics_;
  int64_t step_ = 0;
  int64_t samples_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t resumed_from_ = -1;
  int64_t last_eval_epoch_ = -1;
  std::optional<EvalReport> last_eval_;
};

Status Run::Setup() {
  if (c_.threads > 0) torch::set_num_threads(c_.threads);
  REEL_ASSIGN_OR_RETURN(device_, ResolveDevice(c_.device, o_.world.local_rank));
  REEL_ASSIGN_OR_RETURN(precision_, ResolvePrecision(c_.amp, device_));
  torch::manual_seed(c_.seed);
  REEL_ASSIGN_OR_RETURN(model_, models::BuildModel(c_.model));
  module_ = model_.ptr();
  module_->to(device_);
  module_->train();
  for (auto& p : module_->parameters()) params_.push_back(p);
  optimizer_ = MakeOptimizer(*module_, c_.optimizer);
  scaler_ = std::make_unique<GradScaler>(precision_.scale_loss);

  REEL_ASSIGN_OR_RETURN(store_, OpenDataset(c_));
  auto opened =
      loader::Loader::Open(*store_, c_.TrainLoaderOptions(o_.world.world_size, o_.world.rank));
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
  REEL_RETURN_IF_ERROR(ValidateSchedule(schedule_));

  REEL_ASSIGN_OR_RETURN(auto checkpoints, CheckpointStore::Open(c_.checkpoint_uri));
  checkpoints_.emplace(std::move(checkpoints));
  if (!leader()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(c_.run_dir, ec);
  if (ec) return InternalError("cannot create run_dir '" + c_.run_dir + "': " + ec.message());
  return Status::Ok();
}

// Rank 0 picks the checkpoint (or refuses to start) and tells the others: -1 = start fresh,
// -2 = rank 0 failed. Ranks then load the same step.
Result<int64_t> Run::AgreeOnResumeStep() {
  int64_t choice = -1;
  Status leader_status;
  if (leader()) {
    auto latest = checkpoints_->LatestStep();
    if (!latest.ok()) {
      leader_status = latest.status();
    } else if (*latest && !o_.resume) {
      leader_status = FailedPreconditionError(
          "checkpoints of an earlier run are at " + checkpoints_->uri() + " (step " +
          std::to_string(**latest) +
          "); pass --resume to continue it, or set checkpoint.uri or run_dir elsewhere");
    } else if (*latest) {
      choice = **latest;
    } else if (o_.resume) {
      Logger("train")->warn("--resume: no checkpoint at {} yet; starting from step 0",
                            checkpoints_->uri());
    }
    if (!leader_status.ok()) choice = -2;
  }
  if (comm_) {
    torch::Tensor shared = torch::tensor({choice}, torch::kLong);
    REEL_RETURN_IF_ERROR(comm_->Broadcast({shared}, 0, "checkpoint step to resume from"));
    choice = shared.item<int64_t>();
  }
  if (!leader_status.ok()) return leader_status;
  if (choice == -2)
    return FailedPreconditionError("rank 0 could not start the run (its log says why)");
  return choice;
}

Status Run::Resume() {
  REEL_ASSIGN_OR_RETURN(int64_t chosen, AgreeOnResumeStep());
  std::optional<int64_t> latest;
  if (chosen >= 0) latest = chosen;
  if (!o_.resume || !latest) {
    return loader_->Start({c_.seed, 0, 0});
  }
  auto loaded_cp = checkpoints_->Load(*latest);
  if (!loaded_cp.ok() && !leader()) {
    return Status(loaded_cp.status().code(), "rank " + std::to_string(o_.world.rank) +
                                                 " cannot read checkpoint step " +
                                                 std::to_string(*latest) +
                                                 " that rank 0 resumes from (checkpoints must be "
                                                 "on storage every node reads, e.g. s3:// "
                                                 "or a shared file system): " +
                                                 loaded_cp.status().message());
  }
  REEL_ASSIGN_OR_RETURN(CheckpointData cp, std::move(loaded_cp));
  Status loaded = models::LoadStateDict(*module_, cp.model);
  if (!loaded.ok()) {
    return FailedPreconditionError("checkpoint step " + std::to_string(cp.step) + " at " +
                                   checkpoints_->uri() + " does not fit model '" + c_.model.name +
                                   "': " + loaded.message());
  }
  REEL_RETURN_IF_ERROR(LoadOptimizerState(*optimizer_, *module_, "optimizer.", cp.state));
  REEL_RETURN_IF_ERROR(SetRngState(torch::Device(torch::kCPU), cp.state, "rng.cpu"));
  if (device_.is_cuda()) REEL_RETURN_IF_ERROR(SetRngState(device_, cp.state, "rng.cuda"));
  auto it = cp.state.metadata.find("trainer");
  if (it == cp.state.metadata.end()) {
    return DataLossError("checkpoint step " + std::to_string(cp.step) + " at " +
                         checkpoints_->uri() + " has no trainer state");
  }
  REEL_ASSIGN_OR_RETURN(
      TrainerState trainer,
      TrainerState::FromJson(it->second, checkpoints_->uri() + CheckpointStore::DirName(cp.step)));
  const loader::LoaderState loader_state = trainer.loader;
  step_ = cp.step;
  resumed_from_ = cp.step;
  samples_ = trainer.samples;
  skipped_steps_ = trainer.skipped_steps;
  last_eval_epoch_ = trainer.last_eval_epoch;
  GradScalerState scaler;
  scaler.scale = trainer.loss_scale;
  scaler.good_steps = trainer.loss_scale_good_steps;
  scaler_->set_state(scaler);
  if (cp.config_text != c_.source_text) {
    Logger("train")->warn("resuming step {} with a config that differs from the checkpoint's",
                          cp.step);
  }
  WriteLine({{"event", "resume"},
             {"step", step_},
             {"checkpoint", checkpoints_->uri() + CheckpointStore::DirName(step_)}});
  Logger("train")->info("resumed from step {} ({} samples seen)", step_, samples_);
  return loader_->Start(loader_state);
}

Status Run::SaveCheckpoint() {
  if (!leader()) return WaitForLeader("rank 0 writing checkpoint step " + std::to_string(step_));
  CheckpointData cp;
  cp.step = step_;
  cp.model = models::SaveStateDict(*module_);
  SaveOptimizerState(*optimizer_, *module_, "optimizer.", &cp.state);
  cp.state.tensors["rng.cpu"] = models::ToTensorBytes(GetRngState(torch::Device(torch::kCPU)));
  if (device_.is_cuda()) cp.state.tensors["rng.cuda"] = models::ToTensorBytes(GetRngState(device_));
  TrainerState trainer;
  trainer.step = step_;
  trainer.samples = samples_;
  trainer.skipped_steps = skipped_steps_;
  trainer.last_eval_epoch = last_eval_epoch_;
  trainer.loss_scale = scaler_->state().scale;
  trainer.loss_scale_good_steps = scaler_->state().good_steps;
  trainer.total_steps = schedule_.total_steps;
  trainer.model = c_.model.name;
  trainer.loader = loader_->state();
  cp.state.metadata["trainer"] = trainer.ToJson();
  cp.config_text = c_.source_text;
  auto start = Clock::now();
  REEL_RETURN_IF_ERROR(checkpoints_->Save(cp, c_.checkpoint_keep));
  WriteLine({{"event", "checkpoint"}, {"step", step_}, {"seconds", Seconds(start)}});
  Logger("train")->info("checkpoint at step {} written to {}{}", step_, checkpoints_->uri(),
                        CheckpointStore::DirName(step_));
  return WaitForLeader("rank 0 writing checkpoint step " + std::to_string(step_));
}

// Rank 0 works alone (checkpoints, evaluation) while the others wait, for longer than the
// watchdog's collective timeout; a dead rank 0 still fails the wait at once.
Status Run::WaitForLeader(const std::string& what) {
  if (!comm_) return Status::Ok();
  const auto patience =
      std::max(std::chrono::milliseconds(static_cast<int64_t>(c_.dist.timeout_s * 1000)),
               std::chrono::milliseconds(3600 * 1000));
  return comm_->FollowLeader(what, patience);
}

Status Run::ConnectWorld() {
  if (!o_.world.distributed()) return Status::Ok();
  dist::CommOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(c_.dist.timeout_s * 1000));
  options.connect_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(c_.dist.connect_timeout_s * 1000));
  options.interface_name = c_.dist.iface;
  options.cuda = device_.is_cuda();
  REEL_ASSIGN_OR_RETURN(comm_, dist::Comm::Connect(o_.world, options));
  return Status::Ok();
}

Status Run::EvaluateAndReport(bool final_eval) {
  if (!leader()) return WaitForLeader("rank 0 evaluating at step " + std::to_string(step_));
  auto start = Clock::now();
  REEL_ASSIGN_OR_RETURN(EvalReport report,
                        Evaluate(model_, *module_, device_, precision_, *store_,
                                 c_.EvalLoaderOptions(c_.data.val_split), c_.model.num_classes));
  nlohmann::json line = nlohmann::json::parse(report.ToJson());
  line["event"] = final_eval ? "final_eval" : "eval";
  line["step"] = step_;
  line["epoch"] = static_cast<int64_t>(loader_->state().epoch);
  line["split"] = c_.data.val_split;
  line["seconds"] = Seconds(start);
  WriteLine(line);
  Logger("train")->info("step {}: {} top-1 {:.3f}, top-5 {:.3f}, video top-1 {:.3f} ({} clips)",
                        step_, c_.data.val_split, report.top1, report.top5, report.video_top1,
                        report.clips);
  if (final_eval) {
    std::ofstream out(c_.run_dir + "/eval.json", std::ios::trunc);
    out << report.ToJson() << "\n";
    if (!out) return InternalError("cannot write " + c_.run_dir + "/eval.json");
  }
  last_eval_ = report;
  return WaitForLeader("rank 0 evaluating at step " + std::to_string(step_));
}

// The next training micro-batch, moving to the next epoch (after its evaluation) at the end of one.
Result<loader::Batch> Run::NextBatch() {
  REEL_ASSIGN_OR_RETURN(auto batch, loader_->Next());
  if (batch) return std::move(*batch);
  const int64_t epoch = loader_->state().epoch;
  if (c_.eval_every_epochs > 0 && (epoch + 1) % c_.eval_every_epochs == 0 &&
      last_eval_epoch_ < epoch) {
    last_eval_epoch_ = epoch;
    REEL_RETURN_IF_ERROR(EvaluateAndReport(false));
  }
  REEL_RETURN_IF_ERROR(loader_->Start({c_.seed, epoch + 1, 0}));
  REEL_ASSIGN_OR_RETURN(batch, loader_->Next());
  if (!batch) return InternalError("the loader gave an empty epoch");
  return std::move(*batch);
}

void Run::WriteLine(const nlohmann::json& line) {
  if (!metrics_.is_open()) return;
  metrics_ << line.dump() << "\n";
  metrics_.flush();
}

Result<TrainResult> Run::Go() {
  auto start = Clock::now();
  REEL_RETURN_IF_ERROR(Setup());
  REEL_RETURN_IF_ERROR(ConnectWorld());
  if (leader()) {
    metrics_.open(c_.run_dir + "/metrics.jsonl", std::ios::app);
    if (!metrics_)
      return InternalError("cannot open " + c_.run_dir + "/metrics.jsonl for appending");
  }
  REEL_RETURN_IF_ERROR(Resume());
  const int world = o_.world.world_size;
  if (comm_) {
    // Every rank starts from rank 0's weights and buffers (the same seed makes them equal
    // already; a resumed rank 0 is the reference either way).
    std::vector<torch::Tensor> state = params_;
    for (auto& b : module_->buffers()) {
      state.push_back(b);
      buffers_.push_back(b);
    }
    REEL_RETURN_IF_ERROR(comm_->Broadcast(state, 0, "parameters and buffers from rank 0"));
    if (!c_.dist.broadcast_buffers) buffers_.clear();
    dist::ReducerOptions reducer;
    reducer.bucket_cap_bytes = static_cast<int64_t>(c_.dist.bucket_cap_mb * 1024 * 1024);
    reducer.first_bucket_bytes = static_cast<int64_t>(c_.dist.first_bucket_mb * 1024 * 1024);
    REEL_ASSIGN_OR_RETURN(reducer.compression, dist::ParseGradCompression(c_.dist.compression));
    std::vector<dist::Reducer::NamedParameter> named;
    for (auto& p : module_->named_parameters()) named.emplace_back(p.key(), p.value());
    REEL_ASSIGN_OR_RETURN(reducer_, dist::Reducer::Create(std::move(named), *comm_, reducer));
  }
  if (leader()) {
    Logger("train")->info(
        "training {} on {} for {} steps ({} warmup), {} clips per step, on {}{}", c_.model.name,
        c_.data.dataset, schedule_.total_steps, schedule_.warmup_steps,
        c_.data.batch_size * c_.grad_accum * world, device_.str(),
        world > 1 ? " x " + std::to_string(world) + " processes (" + comm_->backend() + ")" : "");
  }

  Progress progress("train", static_cast<uint64_t>(schedule_.total_steps), Progress::Unit::kItems,
                    o_.progress && leader());
  progress.SetSecondaryName("clips");
  progress.Add(static_cast<uint64_t>(step_));
  const int64_t stop_at = o_.stop_after_steps > 0
                              ? std::min(schedule_.total_steps, step_ + o_.stop_after_steps)
                              : schedule_.total_steps;
  // The logging window.
  double window_loss = 0, window_wait = 0, window_norm = 0;
  int64_t window_steps = 0, window_clips = 0;
  auto window_start = Clock::now();

  while (step_ < stop_at) {
    for (auto& p : params_) p.mutable_grad() = torch::Tensor();  // set to none: no memset
    double step_loss = 0;
    for (int micro = 0; micro < c_.grad_accum; ++micro) {
      REEL_ASSIGN_OR_RETURN(loader::Batch batch, NextBatch());
      window_wait += batch.input_wait_s;
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
        AutocastGuard autocast(precision_.autocast, precision_.dtype);
        logits = model_.forward(input);
      }
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          logits.to(torch::kFloat), labels,
          torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(c_.label_smoothing));
      scaler_->ScaleLoss(loss / c_.grad_accum).backward();
      step_loss += loss.item<double>() / c_.grad_accum;
      samples_ += clips * world;
      window_clips += clips * world;
    }
    if (reducer_) REEL_RETURN_IF_ERROR(reducer_->Finish());
    if (!std::isfinite(step_loss) && !scaler_->enabled()) {
      return InternalError("the loss is " + std::to_string(step_loss) + " at step " +
                           std::to_string(step_ + 1) +
                           ": training diverged (lower optimizer.lr or set train.clip_grad_norm)");
    }
    const bool finite = scaler_->Unscale(params_);
    double norm = 0;
    if (finite && c_.clip_grad_norm > 0) {
      norm = torch::nn::utils::clip_grad_norm_(params_, c_.clip_grad_norm);
    }
    const double lr = LearningRate(schedule_, step_);
    SetLearningRate(*optimizer_, lr);
    if (finite)
      optimizer_->step();
    else
      ++skipped_steps_;
    scaler_->Update(finite);
    ++step_;
    progress.Add(1);
    progress.AddSecondary(static_cast<uint64_t>(c_.data.batch_size * c_.grad_accum * world));
    window_loss += step_loss;
    window_norm += norm;
    ++window_steps;

    if (step_ % c_.log_every == 0 || step_ == stop_at) {
      StepMetrics m;
      m.step = step_;
      m.epoch = loader_->state().epoch;
      m.loss = window_loss / window_steps;
      if (comm_) {
        // Every rank's loss, gathered by one small all-reduce (each rank fills its own slot),
        // so the log shows the job's mean and how far ranks differ, not rank 0's alone.
        torch::Tensor losses = torch::zeros({world}, torch::kFloat64);
        losses[o_.world.rank] = m.loss;
        REEL_RETURN_IF_ERROR(
            comm_->AllReduce(losses, "losses for the log at step " + std::to_string(step_)));
        m.rank_losses.assign(losses.data_ptr<double>(), losses.data_ptr<double>() + world);
        m.loss = losses.mean().item<double>();
      }
      m.lr = lr;
      const double elapsed = Seconds(window_start);
      m.clips_per_s = elapsed > 0 ? window_clips / elapsed : 0;
      m.input_wait_s = window_wait;
      m.input_wait_share = elapsed > 0 ? window_wait / elapsed : 0;
      m.grad_norm = window_norm / window_steps;
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
      WriteLine(line);
      if (o_.on_log) o_.on_log(m);
      window_loss = window_wait = window_norm = 0;
      window_steps = window_clips = 0;
      window_start = Clock::now();
    }
    const bool end = step_ == schedule_.total_steps;
    if (!end && c_.checkpoint_every_steps > 0 && step_ % c_.checkpoint_every_steps == 0) {
      REEL_RETURN_IF_ERROR(SaveCheckpoint());
    }
  }
  progress.Finish();

  TrainResult result;
  result.finished = step_ == schedule_.total_steps;
  if (result.finished || step_ > 0) REEL_RETURN_IF_ERROR(SaveCheckpoint());
  if (result.finished) {
    REEL_RETURN_IF_ERROR(EvaluateAndReport(true));
    result.eval = last_eval_;
  }
  result.steps = step_;
  result.resumed_from = resumed_from_;
  result.samples = samples_;
  result.seconds = Seconds(start);
  return result;
}

}  // namespace

Result<TrainResult> RunTraining(const TrainConfig& config, const TrainOptions& options) {
  try {
    Run run(config, options);
    return run.Go();
  } catch (const c10::Error& e) {
    return InternalError(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

Result<EvalReport> RunEvaluation(const TrainConfig& config, const EvalOptions& options) {
  try {
    if (config.threads > 0) torch::set_num_threads(config.threads);
    REEL_ASSIGN_OR_RETURN(torch::Device device, ResolveDevice(config.device));
    REEL_ASSIGN_OR_RETURN(Precision precision, ResolvePrecision(config.amp, device));
    REEL_ASSIGN_OR_RETURN(auto checkpoints, CheckpointStore::Open(options.checkpoint_uri.empty()
                                                                      ? config.checkpoint_uri
                                                                      : options.checkpoint_uri));
    REEL_ASSIGN_OR_RETURN(CheckpointData cp, checkpoints.Load(options.step));
    REEL_ASSIGN_OR_RETURN(torch::nn::AnyModule model, models::BuildModel(config.model));
    std::shared_ptr<torch::nn::Module> module = model.ptr();
    Status loaded = models::LoadStateDict(*module, cp.model);
    if (!loaded.ok()) {
      return FailedPreconditionError("checkpoint step " + std::to_string(cp.step) + " at " +
                                     checkpoints.uri() + " does not fit model '" +
                                     config.model.name + "': " + loaded.message());
    }
    module->to(device);
    REEL_ASSIGN_OR_RETURN(auto store, OpenDataset(config));
    loader::LoaderOptions eval =
        config.EvalLoaderOptions(options.split.empty() ? config.data.val_split : options.split);
    if (options.eval_clips > 0) {
      eval.clip.clips_per_video = options.eval_clips;
      eval.clip.sampling =
          options.eval_clips > 1 ? loader::ClipSampling::kUniform : loader::ClipSampling::kCenter;
    }
    return Evaluate(model, *module, device, precision, *store, eval, config.model.num_classes);
  } catch (const c10::Error& e) {
    return InternalError(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

}  // namespace reel::train
