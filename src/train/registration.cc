#include "train/registration.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/build_info.h"
#include "base/config.h"
#include "base/files.h"
#include "base/hash.h"
#include "base/json.h"
#include "dataset/layout.h"
#include "registry/views.h"
#include "storage/open.h"
#include "train/train_config.h"

namespace reel::train {
namespace {

namespace fs = std::filesystem;

// SHA-256 of the dataset's manifest.json; "" when it cannot be read (the version still records
// the URI: a dataset that moved is not a reason to refuse a registration).
std::string DatasetHash(const std::string& dataset) {
  if (dataset.empty()) return "";
  auto store = storage::OpenStore(dataset);
  if (!store.ok()) return "";
  auto bytes = (*store)->Get(dataset::kManifestFileName);
  return bytes.ok() ? Sha256Hex(*bytes) : "";
}

Result<models::ModelSpec> ModelSection(const std::string& text, const std::string& source) {
  REEL_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadString(text, source));
  if (!root.IsMap() || !root.Has("model")) {
    return InvalidArgumentError(source + ": no model section (the architecture to register)");
  }
  REEL_ASSIGN_OR_RETURN(ConfigNode model, root.Child("model"));
  return models::ModelSpecFromConfig(model);
}

void AddCodeVersion(registry::NewVersion* v) {
  const BuildInfo& build = GetBuildInfo();
  v->code_commit = build.git_commit;
  v->code_dirty = build.git_dirty;
}

Result<registry::NewVersion> FromSafetensors(const std::string& path, const ImportOptions& o) {
  if (o.config.empty()) {
    return InvalidArgumentError(path +
                                " is a safetensors file: give --config with its model "
                                "section (the architecture)");
  }
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  registry::NewVersion v;
  REEL_ASSIGN_OR_RETURN(v.weights, models::ReadSafetensors(bytes, path));
  REEL_ASSIGN_OR_RETURN(v.config, ReadFileToString(o.config));
  REEL_ASSIGN_OR_RETURN(models::ModelSpec spec, ModelSection(v.config, o.config));
  v.architecture = ArchitectureJson(spec);
  v.recipe = {{"op", "register"}, {"source", path}};
  AddCodeVersion(&v);
  return v;
}

Result<nlohmann::json> ReadEval(const std::string& run_dir) {
  const std::string path = run_dir + "/eval.json";
  if (!fs::exists(path)) return nlohmann::json();
  REEL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJson(text, path);
}

}  // namespace

Result<models::SafetensorsFile> ReadInitialWeights(const std::string& init,
                                                   const RegistryConfig& config,
                                                   std::optional<registry::VersionId>* parent) {
  *parent = std::nullopt;
  if (!registry::IsModelUri(init)) {
    REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(init));
    return models::ReadSafetensors(bytes, init);
  }
  REEL_ASSIGN_OR_RETURN(
      auto reg, registry::OpenRegistry(registry::RegistryUriOrDefault(config.uri), config.chunks));
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo version, reg->Get(init));
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile weights, reg->PullWeights(version));
  *parent = version.id;
  return weights;
}

namespace {

// The version `alias` points at when it is this run's checkpoint at `step`.
std::optional<registry::VersionInfo> SameBest(registry::Registry& reg, const TrainConfig& config,
                                              int64_t step) {
  Result<registry::VersionInfo> v = reg.Get(registry::ModelRef{
      config.registry.model, registry::ModelRef::Kind::kAlias, 0, config.registry.best_alias}
                                                .ToString());
  if (!v.ok()) return std::nullopt;
  const nlohmann::json& r = v->recipe;
  const bool same = r.value("checkpoint", "") == "best" &&
                    r.value("source", "") == config.run_dir && r.value("step", int64_t{-1}) == step;
  return same ? std::optional<registry::VersionInfo>(*v) : std::nullopt;
}

}  // namespace

Result<registry::VersionInfo> RegisterBestModel(const TrainConfig& config,
                                                const CheckpointData& checkpoint,
                                                const nlohmann::json& eval,
                                                const std::optional<registry::VersionId>& parent) {
  const RegistryConfig& rc = config.registry;
  REEL_ASSIGN_OR_RETURN(auto reg,
                        registry::OpenRegistry(registry::RegistryUriOrDefault(rc.uri), rc.chunks));
  if (auto kept = SameBest(*reg, config, checkpoint.step)) return *kept;
  REEL_ASSIGN_OR_RETURN(registry::NewVersion nv,
                        VersionFromCheckpoint(checkpoint, &eval, config.run_dir, false));
  nv.model = rc.model;
  nv.branch = rc.branch;
  nv.message = "reel train " + config.run_dir + ": the best validation top-1, at step " +
               std::to_string(checkpoint.step);
  if (parent) nv.parents.push_back(*parent);
  nv.recipe["op"] = "train";
  nv.recipe["checkpoint"] = "best";
  if (!config.model_init.empty()) nv.recipe["init"] = config.model_init;
  nv.tags["checkpoint"] = "best";
  const registry::Actor who = registry::Actor::Local();
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo v, reg->Register(nv, who));
  REEL_RETURN_IF_ERROR(reg->SetAlias(v.id.model, rc.best_alias, v.id.version, who));
  return v;
}

Result<registry::VersionInfo> RegisterTrainedModel(
    const TrainConfig& config, const CheckpointData& checkpoint, const nlohmann::json* eval,
    const std::optional<registry::VersionId>& parent) {
  const RegistryConfig& rc = config.registry;
  REEL_ASSIGN_OR_RETURN(registry::NewVersion nv,
                        VersionFromCheckpoint(checkpoint, eval, config.run_dir, rc.with_optimizer));
  nv.model = rc.model;
  nv.branch = rc.branch;
  nv.message = "reel train " + config.run_dir;
  if (parent) nv.parents.push_back(*parent);
  nv.recipe["op"] = "train";
  nv.reuse_identical_head = true;  // a rerun of a finished run reports again, registers nothing
  if (!config.model_init.empty()) nv.recipe["init"] = config.model_init;
  REEL_ASSIGN_OR_RETURN(auto reg,
                        registry::OpenRegistry(registry::RegistryUriOrDefault(rc.uri), rc.chunks));
  const registry::Actor who = registry::Actor::Local();
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo v, reg->Register(nv, who));
  for (const std::string& alias : rc.aliases) {
    REEL_RETURN_IF_ERROR(reg->SetAlias(v.id.model, alias, v.id.version, who));
  }
  return v;
}

nlohmann::json ArchitectureJson(const models::ModelSpec& spec) {
  nlohmann::json a = {{"name", spec.name},
                      {"num_classes", spec.num_classes},
                      {"width", spec.width},
                      {"layers", spec.layers}};
  // Only when set, so the architectures recorded before these keys existed compare equal.
  if (spec.head_stage != 4) a["layer"] = "layer" + std::to_string(spec.head_stage);
  if (!spec.hidden.empty()) a["hidden"] = spec.hidden;
  if (spec.in_features != 0) a["in_features"] = spec.in_features;
  return a;
}

Result<models::ModelSpec> SpecFromArchitecture(const nlohmann::json& architecture,
                                               const std::string& source) {
  models::ModelSpec spec;
  try {
    spec.name = architecture.at("name").get<std::string>();
    spec.num_classes = architecture.at("num_classes").get<int>();
    spec.width = architecture.value("width", 0);
    if (architecture.contains("layers"))
      spec.layers = architecture["layers"].get<std::array<int, 4>>();
    if (architecture.contains("hidden"))
      spec.hidden = architecture["hidden"].get<std::vector<int>>();
    spec.in_features = architecture.value("in_features", 0);
    if (architecture.contains("layer")) {
      REEL_ASSIGN_OR_RETURN(spec.head_stage,
                            models::StageOfLayer(architecture["layer"].get<std::string>()));
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(source + ": the version's architecture is not one Reel builds (" +
                                e.what() + ")");
  }
  return spec;
}

nlohmann::json MetricsJson(const nlohmann::json& eval_report) {
  nlohmann::json m = eval_report.is_object() ? eval_report : nlohmann::json::object();
  m.erase("predictions");
  return m;
}

Result<registry::NewVersion> VersionFromCheckpoint(const CheckpointData& checkpoint,
                                                   const nlohmann::json* eval,
                                                   const std::string& origin, bool with_optimizer) {
  registry::NewVersion v;
  v.weights = checkpoint.model;
  if (with_optimizer) v.optimizer = checkpoint.state;
  v.config = checkpoint.config_text;
  REEL_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfigText(v.config, origin + " config"));
  v.architecture = ArchitectureJson(config.model);
  v.dataset_uri = config.data.dataset;
  v.dataset_hash = DatasetHash(config.data.dataset);
  if (eval != nullptr) v.metrics = MetricsJson(*eval);
  v.recipe = {{"op", "register"}, {"source", origin}, {"step", checkpoint.step}};
  AddCodeVersion(&v);
  if (config.model.name == "head") REEL_RETURN_IF_ERROR(WithBackbone(config, &v));
  return v;
}

Result<registry::NewVersion> VersionFromPath(const std::string& path,
                                             const ImportOptions& options) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.size() < 12 || path.substr(path.size() - 12) != ".safetensors") {
      return InvalidArgumentError(path + ": not a .safetensors file");
    }
    return FromSafetensors(path, options);
  }
  if (!fs::is_directory(path, ec)) return NotFoundError(path + ": no such file or directory");
  std::string store = path, run_dir;
  std::optional<int64_t> step;
  if (fs::exists(path + "/checkpoints/latest")) {
    run_dir = path;
    store = path + "/checkpoints";
  } else if (fs::exists(path + "/model.safetensors")) {
    fs::path folder = fs::path(path).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();  // "step-…/"
    const std::string name = folder.filename().string();
    int64_t n = -1;
    if (std::sscanf(name.c_str(), "step-%ld", &n) != 1 || n < 0) {
      return InvalidArgumentError(path + ": a checkpoint folder is named step-NNNNNNNNNN");
    }
    step = n;
    store = folder.has_parent_path() ? folder.parent_path().string() : ".";
  } else if (!fs::exists(path + "/latest")) {
    return InvalidArgumentError(path +
                                " is neither a run directory (with checkpoints/), a "
                                "checkpoint folder nor a .safetensors file");
  }
  REEL_ASSIGN_OR_RETURN(CheckpointStore checkpoints, CheckpointStore::Open(store));
  REEL_ASSIGN_OR_RETURN(CheckpointData checkpoint, checkpoints.Load(step));
  nlohmann::json eval;
  if (!run_dir.empty()) {
    REEL_ASSIGN_OR_RETURN(eval, ReadEval(run_dir));
  }
  return VersionFromCheckpoint(checkpoint, eval.is_null() ? nullptr : &eval, path,
                               options.with_optimizer);
}

}  // namespace reel::train
