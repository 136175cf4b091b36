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

#include "loader/loader.h"
#include "models/video_resnet.h"
#include "parallel/comm.h"
#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "parallel/ps_client.h"
#include "parallel/ps_server.h"
#include "parallel/reducer.h"
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
  CheckpointData CheckpointState();  // the trainer's state, RNG and config: all but the weights
  Status EvaluateAndReport(bool final_eval);
  int EvalThreads() const;  // 0: leave LibTorch's thread count as it is
  Result<loader::Batch> NextBatch();
  void WriteLine(nlohmann::json line);  // by value: it adds the time
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
  Result<double> ClipGradients();
  Status MakeStepOptimizer();  // over params_, once they are this rank's

  // Pipeline stages (parallel.pipeline_stages > 1; run_pipeline.cc): every rank builds the whole
  // model and trains the units [cuts_[stage], cuts_[stage+1]) of its replica's pipeline.
  // stages_ is decided by PlanStages (parallel.pipeline_stages, or the planner's for auto).
  bool pipelined() const { return stages_ > 1; }
  int replicas() const { return ps() ? ps_workers() : o_.world.world_size / stages_; }
  int replica() const { return o_.world.rank / stages_; }
  int stage() const { return o_.world.rank % stages_; }
  bool reads_data() const { return stage() == 0; }
  Status CheckPipelineLayout();
  Status PlanStages();
  Result<std::vector<parallel::UnitCost>> ProfileUnits();          // on rank 0
  Result<std::vector<int>> PlanOnLeader(double link_bytes_per_s);  // [stages, cuts...]
  int64_t WorkerMemory() const;
  Status MakePipeline();
  Status OpenLoader();
  struct StageState {  // a stage's parameters and buffers, by name, in the module's order
    std::vector<std::string> parameter_names, buffer_names;
    std::vector<torch::Tensor> parameters, buffers;
  };
  StageState StageOf(int stage) const;
  bool StageOwns(int stage, const std::string& name) const;
  Result<double> PipelineGradients();
  Result<bool> AgreeOnEval();
  Status AgreeOnFinite(bool* loss_finite, bool* grads_finite);
  // Every rank but 0 drops the weights of the other stages (rank 0 keeps the whole model: it
  // evaluates and registers it); GatherModel sends each stage's current weights to rank 0.
  void ReleaseOtherStages();
  Status GatherModel();
  Status SaveShardedCheckpoint();

  // Parameter servers (parallel.parameter_servers = K > 0; run_ps.cc): the last K ranks serve a
  // shard of the model's state each and run its optimiser; the other ranks are workers that pull
  // before each step and push its gradients after, with no process group between them (a worker
  // or server that dies is restarted alone).
  bool ps() const { return c_.parallel.parameter_servers > 0; }
  int ps_workers() const { return o_.world.world_size - c_.parallel.parameter_servers; }
  bool ps_server() const { return ps() && o_.world.rank >= ps_workers(); }
  struct PsShard {  // one server's part, names beside the tensors
    std::vector<std::string> parameter_names, buffer_names;
    parallel::PsShardTensors tensors;
  };
  Status CheckPsLayout() const;
  Result<std::vector<PsShard>> PsShards() const;
  Result<TrainResult> ServeShard(Clock::time_point start);  // a server rank's whole run
  Status RestoreShard(const PsShard& shard, const std::string& path, parallel::PsShardState* state);
  Status SnapshotShard(const PsShard& shard, const std::string& path,
                       const parallel::PsShardState& state);
  Status ResumeFromServers();  // a worker: where the servers say it got to
  void AddPsMetrics(nlohmann::json* line);
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
  std::unique_ptr<parallel::Comm> comm_;
  std::unique_ptr<parallel::Reducer> reducer_;
  std::optional<parallel::Mesh> mesh_;
  std::optional<parallel::PipelineStage> pipeline_;
  std::unique_ptr<parallel::PsClient> ps_;
  parallel::PsClientStats ps_logged_;         // at the last metrics line
  models::VideoResNetImpl* units_ = nullptr;  // the model as units, when pipelined
  int stages_ = 1;
  std::vector<int> cuts_;
  bool eval_pending_ = false;           // an epoch ended while fetching a pipeline step's batches
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
