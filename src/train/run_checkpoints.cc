#include <ATen/Context.h>

#include <mutex>

#include "base/json.h"
#include "base/logging.h"
#include "models/state_dict.h"
#include "train/optimizer.h"
#include "train/registration.h"
#include "train/run.h"
#include "train/trainer_state.h"

namespace reel::train::internal {
namespace {

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

}  // namespace

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

// The other ranks get these weights from rank 0 in StartReplicas.
Status Run::LoadInitialWeights() {
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile weights,
                        ReadInitialWeights(c_.model_init, c_.registry, &init_version_));
  Status loaded = models::LoadStateDict(*module_, weights);
  if (!loaded.ok()) {
    return FailedPreconditionError("model.init " + c_.model_init + " does not fit model '" +
                                   c_.model.name + "': " + loaded.message());
  }
  WriteLine({{"event", "init"}, {"weights", c_.model_init}});
  Logger("train")->info("starting from the weights of {}", c_.model_init);
  return Status::Ok();
}

Status Run::KeepIfBest(const EvalReport& report) {
  if (!c_.registry.best || c_.registry.model.empty()) return Status::Ok();
  CheckpointStore best = checkpoints_->Sub("best");
  if (!best_top1_) {  // this process's first evaluation: what an earlier run of it kept
    Result<CheckpointData> kept = best.Load();
    if (!kept.ok() && kept.status().code() != StatusCode::kNotFound) return kept.status();
    best_top1_ = -1;
    if (kept.ok()) {
      auto it = kept->state.metadata.find("eval");
      Result<nlohmann::json> eval = it == kept->state.metadata.end()
                                        ? Result<nlohmann::json>(DataLossError("no eval"))
                                        : ParseJson(it->second, best.uri() + " eval");
      if (!eval.ok() || !(*eval)["top1"].is_number()) {
        return DataLossError("the best checkpoint at " + best.uri() + " has no evaluation report");
      }
      best_top1_ = (*eval)["top1"].get<double>();
    }
  }
  if (report.top1 <= *best_top1_) return Status::Ok();
  CheckpointData cp;
  cp.step = step_;
  cp.model = models::SaveStateDict(*module_);
  cp.state.metadata["eval"] = report.ToJson();
  cp.config_text = c_.source_text;
  REEL_RETURN_IF_ERROR(best.Save(cp, 1));
  best_top1_ = report.top1;
  WriteLine({{"event", "best"}, {"step", step_}, {"top1", report.top1}});
  Logger("train")->info("step {}: the best {} top-1 so far ({:.3f}), kept at {}", step_,
                        c_.data.val_split, report.top1, best.uri());
  return Status::Ok();
}

Status Run::RegisterBest() {
  CheckpointStore best = checkpoints_->Sub("best");
  Result<CheckpointData> kept = best.Load();
  if (!kept.ok()) return kept.status();  // the final evaluation always keeps one
  REEL_ASSIGN_OR_RETURN(nlohmann::json eval,
                        ParseJson(kept->state.metadata["eval"], best.uri() + " eval"));
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo v, RegisterBestModel(c_, *kept, eval, init_version_));
  WriteLine({{"event", "registered_best"}, {"version", v.id.ToString()}, {"step", kept->step}});
  Logger("train")->info("registered the best checkpoint (step {}) as {}, models:/{}@{}", kept->step,
                        v.id.ToString(), v.id.model, c_.registry.best_alias);
  return Status::Ok();
}

Status Run::RegisterModel(TrainResult* result) {
  if (c_.registry.best) {
    Status s = RegisterBest();
    if (!s.ok()) {
      return Status(s.code(), "the run finished, but registering its best checkpoint as model '" +
                                  c_.registry.model + "' failed: " + s.message());
    }
  }
  REEL_ASSIGN_OR_RETURN(CheckpointData last, checkpoints_->Load(step_));
  const nlohmann::json eval =
      last_eval_ ? nlohmann::json::parse(last_eval_->ToJson()) : nlohmann::json();
  Result<registry::VersionInfo> v =
      RegisterTrainedModel(c_, last, last_eval_ ? &eval : nullptr, init_version_);
  if (!v.ok()) {
    return Status(v.status().code(), "the run finished, but registering it as model '" +
                                         c_.registry.model + "' failed (reel models register " +
                                         c_.registry.model + " " + c_.run_dir +
                                         " retries it): " + v.status().message());
  }
  result->registered = v->id.ToString();
  WriteLine({{"event", "registered"}, {"version", result->registered}});
  Logger("train")->info("registered {}", result->registered);
  return Status::Ok();
}

Status Run::Resume() {
  REEL_ASSIGN_OR_RETURN(int64_t chosen, AgreeOnResumeStep());
  std::optional<int64_t> latest;
  if (chosen >= 0) latest = chosen;
  if (!o_.resume || !latest) {
    if (leader() && !c_.model_init.empty()) REEL_RETURN_IF_ERROR(LoadInitialWeights());
    return reads_data() ? loader_->Start({c_.seed, 0, 0}) : Status::Ok();
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
  return reads_data() ? loader_->Start(loader_state) : Status::Ok();
}

CheckpointData Run::CheckpointState() {
  CheckpointData cp;
  cp.step = step_;
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
  return cp;
}

Status Run::SaveCheckpoint() {
  if (pipeline_) return SaveShardedCheckpoint();
  if (!leader()) return WaitForLeader("rank 0 writing checkpoint step " + std::to_string(step_));
  CheckpointData cp = CheckpointState();
  cp.model = models::SaveStateDict(*module_);
  SaveOptimizerState(*optimizer_, *module_, "optimizer.", &cp.state);
  auto start = Clock::now();
  REEL_RETURN_IF_ERROR(checkpoints_->Save(cp, c_.checkpoint_keep));
  WriteLine({{"event", "checkpoint"}, {"step", step_}, {"seconds", Seconds(start)}});
  Logger("train")->info("checkpoint at step {} written to {}{}", step_, checkpoints_->uri(),
                        CheckpointStore::DirName(step_));
  return WaitForLeader("rank 0 writing checkpoint step " + std::to_string(step_));
}

// Rank 0 works alone (checkpoints, evaluation) while the others wait, for longer than the
// watchdog's collective timeout; a dead rank 0 still fails the wait at once.
}  // namespace reel::train::internal
