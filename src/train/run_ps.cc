// Parameter-server training (Run's ps_ members; see run.h): the servers' side (ServeShard) and
// the worker's start (ResumeFromServers). The step itself is TrainStep's, with a pull before and a
// push instead of the optimiser step.
#include <filesystem>

#include "base/files.h"
#include "base/logging.h"
#include "base/subprocess.h"
#include "models/state_dict.h"
#include "parallel/ps_plan.h"
#include "parallel/ps_server.h"
#include "train/optimizer.h"
#include "train/run.h"

namespace reel::train::internal {

Status Run::CheckPsLayout() const {
  if (!ps()) return Status::Ok();
  const int servers = c_.parallel.parameter_servers;
  if (ps_workers() < 1) {
    return InvalidArgumentError(
        "parallel.parameter_servers is " + std::to_string(servers) + " but the job has " +
        std::to_string(o_.world.world_size) +
        " processes: the servers need workers besides them (reel train --nproc N starts N "
        "workers and the servers)");
  }
  return Status::Ok();
}

// The model's parameters and buffers split by size across the servers (parallel/ps_plan.h); every
// rank computes the same split.
Result<std::vector<Run::PsShard>> Run::PsShards() const {
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
  std::vector<int64_t> bytes;
  const auto params = module_->named_parameters();
  const auto buffers = module_->named_buffers();
  names.reserve(params.size() + buffers.size());
  tensors.reserve(names.capacity());
  bytes.reserve(names.capacity());
  for (const auto& p : params) names.push_back(p.key()), tensors.push_back(p.value());
  for (const auto& b : buffers) names.push_back(b.key()), tensors.push_back(b.value());
  for (const auto& t : tensors) bytes.push_back(static_cast<int64_t>(t.nbytes()));
  REEL_ASSIGN_OR_RETURN(std::vector<int> server,
                        parallel::AssignToServers(bytes, c_.parallel.parameter_servers));
  std::vector<PsShard> shards(static_cast<size_t>(c_.parallel.parameter_servers));
  for (size_t i = 0; i < tensors.size(); ++i) {
    PsShard& s = shards[static_cast<size_t>(server[i])];
    const bool is_param = i < params.size();
    (is_param ? s.parameter_names : s.buffer_names).push_back(names[i]);
    (is_param ? s.tensors.parameters : s.tensors.buffers).push_back(tensors[i]);
  }
  return shards;
}

Status Run::SnapshotShard(const PsShard& shard, const std::string& path,
                          const parallel::PsShardState& state) {
  models::SafetensorsFile file;
  for (size_t i = 0; i < shard.parameter_names.size(); ++i) {
    file.tensors[shard.parameter_names[i]] = models::ToTensorBytes(shard.tensors.parameters[i]);
  }
  for (size_t i = 0; i < shard.buffer_names.size(); ++i) {
    file.tensors[shard.buffer_names[i]] = models::ToTensorBytes(shard.tensors.buffers[i]);
  }
  SaveOptimizerState(*optimizer_, *module_, "optimizer.", &file);
  file.metadata["ps"] = state.ToJson();
  REEL_ASSIGN_OR_RETURN(std::string bytes, models::WriteSafetensors(file));
  return WriteFileAtomically(path, bytes);
}

Status Run::RestoreShard(const PsShard& shard, const std::string& path,
                         parallel::PsShardState* state) {
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path, "parameter-server snapshot"));
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile file, models::ReadSafetensors(bytes, path));
  auto restore = [&](const std::vector<std::string>& names,
                     const std::vector<torch::Tensor>& tensors) -> Status {
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = file.tensors.find(names[i]);
      if (it == file.tensors.end()) return DataLossError(path + " has no tensor " + names[i]);
      REEL_ASSIGN_OR_RETURN(torch::Tensor t, models::FromTensorBytes(it->second, names[i]));
      if (!t.sizes().equals(tensors[i].sizes())) {
        return DataLossError(path + ": " + names[i] + " has another shape than the model's");
      }
      torch::NoGradGuard no_grad;
      tensors[i].copy_(t);
    }
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(restore(shard.parameter_names, shard.tensors.parameters));
  REEL_RETURN_IF_ERROR(restore(shard.buffer_names, shard.tensors.buffers));
  REEL_RETURN_IF_ERROR(LoadOptimizerState(*optimizer_, *module_, "optimizer.", file));
  auto meta = file.metadata.find("ps");
  if (meta == file.metadata.end()) return DataLossError(path + " has no parameter-server state");
  REEL_ASSIGN_OR_RETURN(*state, parallel::PsShardState::FromJson(meta->second, ps_workers(), path));
  return Status::Ok();
}

namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

double ShardMegabytes(const parallel::PsShardTensors& t) {
  double bytes = 0;
  for (const auto* list : {&t.parameters, &t.buffers}) {
    for (const auto& x : *list) bytes += static_cast<double>(x.nbytes());
  }
  return bytes / 1e6;
}

}  // namespace

// A server rank: restores its shard's snapshot when resuming (a restart after kill -9 is one),
// serves it until every worker is done, and says how far the job got.
Result<TrainResult> Run::ServeShard(Clock::time_point start) {
  const int shard_index = o_.world.rank - ps_workers();
  module_->to(torch::kCPU);  // a server's shard lives in host memory, where it is served from
  REEL_ASSIGN_OR_RETURN(std::vector<PsShard> shards, PsShards());
  PsShard& shard = shards[static_cast<size_t>(shard_index)];
  optimizer_ = MakeOptimizer(shard.tensors.parameters, c_.optimizer);
  const std::string dir = c_.run_dir + "/ps";
  const std::string path = dir + "/shard-" + std::to_string(shard_index) + ".safetensors";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InternalError("cannot create " + dir + ": " + ec.message());
  parallel::PsShardState state = parallel::PsShardState::Fresh(ps_workers());
  if (o_.resume && std::filesystem::exists(path)) {
    REEL_RETURN_IF_ERROR(RestoreShard(shard, path, &state));
  } else {
    std::filesystem::remove(path, ec);  // an earlier run's: never resumed into this one
    if (!c_.model_init.empty()) REEL_RETURN_IF_ERROR(LoadInitialWeights());
  }
  parallel::ParameterServerOptions so;
  so.shard = shard_index;
  so.workers = ps_workers();
  REEL_ASSIGN_OR_RETURN(so.sync, parallel::ParsePsSync(c_.parallel.sync));
  so.staleness = c_.parallel.staleness;
  so.host = IsLoopback(o_.world.master_addr) ? "127.0.0.1" : "0.0.0.0";
  auto update = [this](int64_t step) {
    SetLearningRate(*optimizer_, LearningRate(schedule_, std::min(step, schedule_.total_steps)));
    optimizer_->step();
    return Status::Ok();
  };
  auto snapshot = [this, &shard, path](const parallel::PsShardState& s) {
    return SnapshotShard(shard, path, s);
  };
  REEL_ASSIGN_OR_RETURN(auto server, parallel::ParameterServer::Start(so, shard.tensors.parameters,
                                                                      shard.tensors.buffers, state,
                                                                      update, snapshot));
  std::string address = server->address();
  if (so.host == "0.0.0.0") address = MachineName() + address.substr(address.rfind(':'));
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(c_.dist.connect_timeout_s * 1000));
  REEL_ASSIGN_OR_RETURN(auto store, parallel::ConnectPsStore(o_.world, timeout));
  REEL_RETURN_IF_ERROR(parallel::PublishPsAddress(*store, shard_index, address));
  Logger("train")->info(
      "parameter server {} of {} at {}: {} tensors, {:.1f} MB, version {} ({}{})", shard_index,
      c_.parallel.parameter_servers, address,
      shard.tensors.parameters.size() + shard.tensors.buffers.size(), ShardMegabytes(shard.tensors),
      state.version, c_.parallel.sync,
      c_.parallel.sync == "ssp" ? ", staleness " + std::to_string(c_.parallel.staleness) : "");
  Status waited = server->Wait(o_.should_stop);
  TrainResult result;
  result.steps = server->state().version;
  result.seconds = Seconds(start);
  if (waited.code() == StatusCode::kCancelled) {
    result.preempted = true;
    return result;
  }
  REEL_RETURN_IF_ERROR(waited);
  result.finished = true;
  return result;
}

// A worker continues at the first step some server lacks its gradient of: 0 for a new job, or
// where the worker it replaces (or the whole job, resumed) stopped. Its data continues there.
Status Run::ResumeFromServers() {
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::max(c_.dist.timeout_s, c_.dist.connect_timeout_s) * 1000));
  REEL_ASSIGN_OR_RETURN(auto store, parallel::ConnectPsStore(o_.world, timeout));
  REEL_ASSIGN_OR_RETURN(std::vector<PsShard> shards, PsShards());
  std::vector<parallel::PsShardTensors> tensors;
  tensors.reserve(shards.size());
  for (auto& s : shards) tensors.push_back(std::move(s.tensors));
  parallel::PsClientOptions co;
  co.worker = o_.world.rank;
  co.timeout = timeout;
  REEL_ASSIGN_OR_RETURN(
      ps_, parallel::PsClient::Make(co, std::move(tensors), parallel::StoreLookup(store)));
  REEL_ASSIGN_OR_RETURN(step_, ps_->ResumeStep());
  if (step_ == 0) {
    if (leader() && !c_.model_init.empty()) REEL_RETURN_IF_ERROR(LoadInitialWeights());
    return loader_->Start({c_.seed, 0, 0});
  }
  const int64_t per_epoch = static_cast<int64_t>(loader_->batches_per_epoch());
  const int64_t micro = step_ * c_.grad_accum;
  const loader::LoaderState at(c_.seed, micro / per_epoch,
                               static_cast<uint64_t>((micro % per_epoch) * c_.data.batch_size),
                               ps_workers());
  resumed_from_ = step_;
  samples_ = step_ * ClipsPerStep();
  last_eval_epoch_ = at.epoch - 1;
  WriteLine({{"event", "resume"}, {"step", step_}, {"from", "parameter servers"}});
  Logger("train")->info("worker {} continues at step {}, where the parameter servers have it",
                        o_.world.rank, step_);
  return loader_->Start(at);
}

// This window's traffic and waits, per step.
void Run::AddPsMetrics(nlohmann::json* line) {
  const parallel::PsClientStats now = ps_->stats();
  const double steps = std::max<int64_t>(window_.steps, 1);
  (*line)["ps_bytes_per_step"] =
      static_cast<double>(now.bytes_sent + now.bytes_received - ps_logged_.bytes_sent -
                          ps_logged_.bytes_received) /
      steps;
  (*line)["ps_wait_s"] = now.wait_s - ps_logged_.wait_s;
  (*line)["ps_max_staleness"] = now.max_staleness;
  (*line)["ps_retries"] = now.retries;
  ps_logged_ = now;
}

}  // namespace reel::train::internal
