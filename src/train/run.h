// Internal to train: one training run (trainer.cc runs the loop, run_checkpoints.cc saves and
// resumes it). Not a public contract; RunTraining in trainer.h is.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/reducer.h"
#include "loader/loader.h"
#include "registry/registry.h"
#include "storage/object_store.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace reel::train::internal {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Everything that lives for one training run.
class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options) : c_(config), o_(options) {}

  Result<TrainResult> Go();

 private:
  Status Setup();
  Status Resume();
  Status LoadInitialWeights();                // model.init, on a fresh run's rank 0
  Status RegisterModel(TrainResult* result);  // registry.model, when the run finished
  // registry.best: keeps the weights of an evaluation that beat every earlier one, and
  // registers the kept checkpoint before the final one.
  Status KeepIfBest(const EvalReport& report);
  Status RegisterBest();
  Status SaveCheckpoint();
  Status EvaluateAndReport(bool final_eval);
  int EvalThreads() const;  // 0: leave LibTorch's thread count as it is
  Result<loader::Batch> NextBatch();
  void WriteLine(const nlohmann::json& line);
  bool leader() const { return o_.world.rank == 0; }
  Status ConnectWorld();
  Status WaitForLeader(const std::string& what);
  Result<int64_t> AgreeOnResumeStep();
  Status OpenMetrics();
  void LogSamples(const loader::Batch& batch);
  Status StartReplicas();
  void LogPlan() const;
  int64_t ClipsPerStep() const;
  Status TrainStep();
  Result<double> AccumulateGradients();
  Status LogAndResetWindow();
  Result<bool> StopAgreed();
  Result<TrainResult> Finish(Clock::time_point start);

  // What the next metrics line averages over.
  struct LogWindow {
    double loss = 0, wait = 0, norm = 0, lr = 0;
    int64_t steps = 0, clips = 0;
    Clock::time_point start = Clock::now();
  };

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
  std::ofstream samples_log_;  // train.log_samples: this rank's batches
  int64_t step_ = 0;
  int64_t samples_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t resumed_from_ = -1;
  bool preempted_ = false;
  int64_t last_eval_epoch_ = -1;
  std::optional<EvalReport> last_eval_;
  std::optional<double> best_top1_;  // of the kept best checkpoint (registry.best); -1: none
  std::optional<registry::VersionId> init_version_;  // model.init's registry version
  LogWindow window_;
};

}  // namespace reel::train::internal
