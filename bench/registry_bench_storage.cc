// registry_bench's versions: training R(2+1)D-18, the peers, and storing each version in Reel and
// in every peer.
#include "bench/registry_bench_storage.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/json.h"
#include "base/status.h"
#include "bench/registry_bench_util.h"
#include "models/model_zoo.h"
#include "models/safetensors.h"
#include "models/state_dict.h"
#include "registry/chunk_cache.h"
#include "registry/registry.h"
#include "registry/weight_store.h"
#include "testing/shell.h"

namespace reel::registry_bench {
namespace {

constexpr char kModel[] = "r2plus1d-18";

// ---------------------------------------------------------------------------------------------
// Weights that a real training run and real fine-tunes produce.

struct TrainOptions {
  int batch = 2, frames = 8, size = 56;
  std::string optimizer = "adamw";
  double lr = 1e-4;
};

// torchvision's R(2+1)D-18 with the Kinetics-400 head, as built (untrained).
Result<torch::nn::AnyModule> BuildR2plus1d18() {
  reel::models::ModelSpec spec;
  spec.name = "r2plus1d_18";
  spec.num_classes = kClasses;
  return reel::models::BuildModel(spec);
}

// R(2+1)D-18 trained on random clips and labels: what the registry sees is a model whose every
// weight moved as real optimizer steps move it, which is all that matters here.
class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> Create(const TrainOptions& options) {
    REEL_ASSIGN_OR_RETURN(torch::nn::AnyModule model, BuildR2plus1d18());
    return std::unique_ptr<Trainer>(new Trainer(std::move(model), options));
  }

  SafetensorsFile Weights() const { return reel::models::SaveStateDict(*model_.ptr()); }

  // Starts a new run from `weights` with a fresh optimizer: every weight trains, or (head_only)
  // only fc, with the backbone's batch-norm statistics frozen as a linear probe keeps them.
  Status Restart(const SafetensorsFile& weights, bool head_only) {
    REEL_RETURN_IF_ERROR(reel::models::LoadStateDict(*model_.ptr(), weights));
    std::vector<torch::Tensor> trainable;
    for (auto& item : model_.ptr()->named_parameters()) {
      const bool trains = !head_only || item.key().rfind("fc.", 0) == 0;
      item.value().set_requires_grad(trains);
      if (trains) trainable.push_back(item.value());
    }
    if (head_only) {
      model_.ptr()->eval();
    } else {
      model_.ptr()->train();
    }
    if (options_.optimizer == "sgd") {
      optimizer_ = std::make_unique<torch::optim::SGD>(
          trainable, torch::optim::SGDOptions(options_.lr).momentum(0.9).weight_decay(1e-4));
    } else {
      optimizer_ = std::make_unique<torch::optim::AdamW>(
          trainable, torch::optim::AdamWOptions(options_.lr).weight_decay(0.01));
    }
    return Status::Ok();
  }

  // LibTorch throws; this is where its exceptions become a Status.
  Status Train(int steps) {
    try {
      for (int i = 0; i < steps; ++i) Step();
    } catch (const std::exception& e) {
      return reel::InternalError(std::string("training step: ") + e.what());
    }
    return Status::Ok();
  }

 private:
  Trainer(torch::nn::AnyModule model, const TrainOptions& options)
      : model_(std::move(model)), options_(options) {}

  void Step() {
    const torch::Tensor x =
        torch::randn({options_.batch, 3, options_.frames, options_.size, options_.size});
    const torch::Tensor y = torch::randint(0, kClasses, {options_.batch}, torch::kLong);
    optimizer_->zero_grad();
    torch::nn::functional::cross_entropy(model_.forward(x), y).backward();
    optimizer_->step();
  }

  torch::nn::AnyModule model_;
  TrainOptions options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// Tensors of `b` whose bytes differ from `a`'s.
int ChangedTensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  int changed = 0;
  for (const auto& [name, t] : b.tensors) {
    auto it = a.tensors.find(name);
    changed += it == a.tensors.end() || it->second.data != t.data;
  }
  return changed;
}

// ---------------------------------------------------------------------------------------------
// The peers: each stores one file per version and says how many bytes that added.

// git-lfs keeps every version of a tracked file whole under .git/lfs/objects.
class GitLfsPeer : public Peer {
 public:
  GitLfsPeer(std::string dir, std::string log) : repo_(std::move(dir)), log_(std::move(log)) {}
  std::string name() const override { return "git-lfs"; }

  Status Init() override {
    REEL_RETURN_IF_ERROR(MakeFolder(repo_));
    return Shell(Git() + "init -q && git lfs install --local >/dev/null && " +
                     "git lfs track '*.safetensors' >/dev/null && git add .gitattributes && " +
                     Commit("init"),
                 log_)
        .status();
  }

  Result<uint64_t> Add(const std::string& label, const std::string& file) override {
    const uint64_t before = TreeBytes(repo_ + "/.git/lfs/objects");
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(Shell("ln -f " + reel::testing::ShellQuote(file) + " " +
                                   reel::testing::ShellQuote(repo_ + "/model.safetensors") +
                                   " && " + Git() + "add model.safetensors && " + Commit(label),
                               log_)
                             .status());
    last_seconds_ = SecondsSince(start);
    return TreeBytes(repo_ + "/.git/lfs/objects") - before;
  }

 private:
  std::string Git() const { return "cd " + reel::testing::ShellQuote(repo_) + " && git "; }
  static std::string Commit(const std::string& label) {
    return "git -c user.name=bench -c user.email=bench@localhost commit -qm " + label;
  }
  std::string repo_, log_;
};

// borg: content-defined chunks (about 2 MiB), deduplicated, each compressed with zstd level 1.
class BorgPeer : public Peer {
 public:
  BorgPeer(std::string dir, std::string log) : dir_(std::move(dir)), log_(std::move(log)) {}
  std::string name() const override { return "borg zstd,1"; }

  Status Init() override {
    REEL_RETURN_IF_ERROR(MakeFolder(dir_ + "/stage"));
    // Borg's cache and keys inside the scratch folder, not in $HOME; no prompt for a plain repo.
    ::setenv("BORG_BASE_DIR", (dir_ + "/home").c_str(), 1);
    ::setenv("BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK", "yes", 1);
    ::setenv("BORG_RELOCATED_REPO_ACCESS_IS_OK", "yes", 1);
    REEL_RETURN_IF_ERROR(Shell("borg init -e none " + Repo(), log_).status());
    REEL_ASSIGN_OR_RETURN(std::string info, Shell("borg info --json " + Repo(), log_));
    REEL_ASSIGN_OR_RETURN(unique_csize_, UniqueCsize(info));
    return Status::Ok();
  }

  // The same path every time, as a backup of a model folder would see it.
  Result<uint64_t> Add(const std::string& label, const std::string& file) override {
    const std::string stage = reel::testing::ShellQuote(dir_ + "/stage");
    REEL_ASSIGN_OR_RETURN(
        std::string out,
        Shell("ln -f " + reel::testing::ShellQuote(file) + " " + stage +
                  "/model.safetensors && cd " + stage + " && borg create --json --compression " +
                  "zstd,1 " + Repo() + "::" + label + " model.safetensors",
              log_));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, reel::ParseJson(out, "borg create --json"));
    // borg's own duration: without the Python interpreter's start-up.
    last_seconds_ = doc.contains("archive") ? doc["archive"].value("duration", 0.0) : 0.0;
    REEL_ASSIGN_OR_RETURN(uint64_t after, UniqueCsize(out));
    const uint64_t added = after - unique_csize_;
    unique_csize_ = after;
    return added;
  }

 private:
  std::string Repo() const { return reel::testing::ShellQuote(dir_ + "/repo"); }

  // The compressed bytes of the repository's unique chunks, from `borg info|create --json`.
  static Result<uint64_t> UniqueCsize(const std::string& json) {
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, reel::ParseJson(json, "borg --json"));
    const nlohmann::json* stats = nullptr;
    if (doc.contains("cache") && doc["cache"].contains("stats")) stats = &doc["cache"]["stats"];
    if (stats == nullptr || !stats->contains("unique_csize") ||
        !stats->at("unique_csize").is_number_unsigned()) {
      return reel::InternalError("borg --json: no cache.stats.unique_csize");
    }
    return stats->at("unique_csize").get<uint64_t>();
  }

  std::string dir_, log_;
  uint64_t unique_csize_ = 0;
};

// casync: content-defined chunks (64 KiB on average), a shared store, an index per version.
class CasyncPeer : public Peer {
 public:
  CasyncPeer(std::string dir, std::string log) : dir_(std::move(dir)), log_(std::move(log)) {}
  std::string name() const override { return "casync zstd"; }

  Status Init() override { return MakeFolder(dir_ + "/store"); }

  Result<uint64_t> Add(const std::string& label, const std::string& file) override {
    const uint64_t before = TreeBytes(dir_ + "/store");
    const std::string index = dir_ + "/" + label + ".caibx";
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(
        Shell(
            "casync make --compression=zstd --store=" + reel::testing::ShellQuote(dir_ + "/store") +
                " " + reel::testing::ShellQuote(index) + " " + reel::testing::ShellQuote(file),
            log_)
            .status());
    last_seconds_ = SecondsSince(start);
    std::error_code ec;
    return TreeBytes(dir_ + "/store") - before + fs::file_size(index, ec);
  }

 private:
  std::string dir_, log_;
};

// ---------------------------------------------------------------------------------------------
// Reel's registry and the peers, fed the same versions.

// The chunks' delta depths, weighted by their bytes.
std::map<int, uint64_t> DepthBytes(const reel::registry::WeightManifest& m) {
  std::map<int, uint64_t> bytes;
  for (const auto& [name, t] : m.tensors) {
    for (const auto& c : t.chunks) bytes[c.depth] += c.size;
  }
  return bytes;
}

}  // namespace

Status StorageRun::Init() {
  REEL_RETURN_IF_ERROR(MakeFolder(work_ + "/versions"));
  reel::registry::RegistryOptions options;
  options.weights = weights_;
  REEL_ASSIGN_OR_RETURN(registry_, Registry::Open(work_ + "/registry", options));
  if (!peers_on_) return Status::Ok();
  const std::string log = work_ + "/peers.log";
  peers_.push_back(std::make_unique<GitLfsPeer>(work_ + "/git-lfs", log));
  peers_.push_back(std::make_unique<BorgPeer>(work_ + "/borg", log));
  peers_.push_back(std::make_unique<CasyncPeer>(work_ + "/casync", log));
  for (auto& p : peers_) REEL_RETURN_IF_ERROR(p->Init());
  return Status::Ok();
}

Result<VersionRow> StorageRun::Add(const std::string& label, const SafetensorsFile& weights,
                                   const std::string& branch,
                                   const std::vector<VersionId>& parents) {
  VersionRow row;
  row.label = label;
  row.path = work_ + "/versions/" + label + ".safetensors";
  REEL_ASSIGN_OR_RETURN(std::string bytes, reel::models::WriteSafetensors(weights));
  row.file_bytes = bytes.size();
  REEL_RETURN_IF_ERROR(WriteFile(row.path, bytes));
  // Each store starts with nothing dirty in the page cache: an fsync also waits for the data
  // that the file before it (or another tool) left unwritten.
  ::sync();
  REEL_RETURN_IF_ERROR(Register(weights, branch, parents, &row));
  for (auto& p : peers_) {
    ::sync();
    REEL_ASSIGN_OR_RETURN(row.peer_added[p->name()], p->Add(label, row.path));
    row.peer_seconds[p->name()] = p->last_seconds();
  }
  Progress(label + ": file " + FormatBytes(row.file_bytes) + ", Reel added " +
           FormatBytes(row.reel_added) + " in " + std::to_string(row.reel_seconds).substr(0, 5) +
           " s (delta depth " + std::to_string(row.depth) + ", max " +
           std::to_string(row.max_depth) + ")");
  return row;
}

Result<std::unique_ptr<Registry>> StorageRun::OpenUncached() const {
  reel::registry::RegistryOptions options;
  options.weights = weights_;
  options.weights.base_cache = std::make_shared<reel::registry::ChunkCache>(0);
  return Registry::Open(work_ + "/registry", options);
}

Status StorageRun::RegisterAgain(const VersionRow& row, const std::string& branch) {
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(row.path));
  REEL_ASSIGN_OR_RETURN(SafetensorsFile weights, reel::models::ReadSafetensors(bytes, row.path));
  VersionRow again;
  again.label = row.label + " again";
  return Register(weights, branch, {}, &again);
}

Status StorageRun::Register(const SafetensorsFile& weights, const std::string& branch,
                            const std::vector<VersionId>& parents, VersionRow* row) {
  reel::registry::NewVersion nv;
  nv.model = kModel;
  nv.branch = branch;
  nv.weights = weights;  // copied before the clock starts: the caller's file stays intact
  nv.parents = parents;
  nv.architecture = {{"name", "r2plus1d_18"}, {"num_classes", kClasses}};
  nv.message = row->label;
  reel::registry::PushStats stats;
  const double cpu_before = ProcessCpuSeconds();
  const Clock::time_point start = Clock::now();
  REEL_ASSIGN_OR_RETURN(row->info, registry_->Register(nv, reel::registry::Actor::Local(), &stats));
  row->reel_seconds = SecondsSince(start);
  row->reel_cpu_seconds = ProcessCpuSeconds() - cpu_before;
  row->raw_bytes = stats.raw_bytes;
  // What the version added: its new chunks, and its manifest in the registry's database.
  row->manifest_bytes = reel::registry::ManifestToJson(row->info.weights).size();
  row->reel_added = row->info.stored_bytes + row->manifest_bytes;
  const std::map<int, uint64_t> depths = DepthBytes(row->info.weights);
  row->max_depth = depths.empty() ? 0 : depths.rbegin()->first;
  for (const auto& [depth, bytes] : depths) {
    if (bytes > depths.at(row->depth)) row->depth = depth;
  }
  return Status::Ok();
}

namespace {

// Trains one step phase, timing it into *seconds.
Status TrainTimed(Trainer& trainer, int steps, double* seconds) {
  const Clock::time_point start = Clock::now();
  REEL_RETURN_IF_ERROR(trainer.Train(steps));
  *seconds += SecondsSince(start);
  return Status::Ok();
}

}  // namespace

Result<SafetensorsFile> UntrainedWeights() {
  REEL_ASSIGN_OR_RETURN(torch::nn::AnyModule model, BuildR2plus1d18());
  return reel::models::SaveStateDict(*model.ptr());
}

Result<Scenarios> RunScenarios(const Args& args, StorageRun& storage) {
  Scenarios s;
  TrainOptions t{args.batch, args.frames, args.size, args.optimizer, args.lr};
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(t));
  s.base_weights = trainer->Weights();
  s.tensors = static_cast<int>(s.base_weights.tensors.size());
  REEL_ASSIGN_OR_RETURN(s.base, storage.Add("base", s.base_weights, "main", {}));

  // (a) One run from the base, a checkpoint every args.steps optimizer steps.
  REEL_RETURN_IF_ERROR(trainer->Restart(s.base_weights, false));
  VersionId parent = s.base.info.id;
  for (int k = 1; k <= args.checkpoints; ++k) {
    REEL_RETURN_IF_ERROR(TrainTimed(*trainer, args.steps, &s.train_seconds));
    REEL_ASSIGN_OR_RETURN(VersionRow row, storage.Add("run-" + std::to_string(k),
                                                      trainer->Weights(), "run", {parent}));
    parent = row.info.id;
    s.run.push_back(std::move(row));
  }

  // (b) Head only, (c) every weight: both fine-tunes of the base.
  REEL_RETURN_IF_ERROR(trainer->Restart(s.base_weights, true));
  REEL_RETURN_IF_ERROR(TrainTimed(*trainer, args.finetune_steps, &s.train_seconds));
  SafetensorsFile head = trainer->Weights();
  s.head_changed_tensors = ChangedTensors(s.base_weights, head);
  REEL_ASSIGN_OR_RETURN(s.head, storage.Add("head-only", head, "head-only", {s.base.info.id}));

  REEL_RETURN_IF_ERROR(trainer->Restart(s.base_weights, false));
  REEL_RETURN_IF_ERROR(TrainTimed(*trainer, args.finetune_steps, &s.train_seconds));
  s.full_weights = trainer->Weights();
  s.full_changed_tensors = ChangedTensors(s.base_weights, s.full_weights);
  REEL_ASSIGN_OR_RETURN(s.full, storage.Add("full", s.full_weights, "full", {s.base.info.id}));
  return s;
}

}  // namespace reel::registry_bench
