// What training leaves behind, as registry versions (registry/registry.h): the weights, the
// architecture (the config's model section), the whole config, the evaluation report, the
// dataset (URI and SHA-256 of its manifest) and the code version.
//
// VersionFromPath reads any of
//   a run directory        RUN/checkpoints (the latest checkpoint) and RUN/eval.json
//   a checkpoint store     a folder with `latest` (its latest checkpoint)
//   one checkpoint folder  step-0000000100/ with model.safetensors and config.yaml
//   a .safetensors file    e.g. weights exported from torchvision; `config` must then name a
//                          YAML file with at least a `model:` section
// Errors: InvalidArgument for a path that is none of these or a config without a model
// section; the checkpoint's and the file's errors (DataLoss for truncated or corrupt files).
// Thread-safety: pure functions of their inputs and files.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "base/status.h"
#include "models/model_spec.h"
#include "registry/registry.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/train_config.h"

namespace reel::train {

struct ImportOptions {
  std::string config;           // for a .safetensors file: its config (YAML)
  bool with_optimizer = false;  // keep the optimiser state of a checkpoint
};

Result<registry::NewVersion> VersionFromPath(const std::string& path,
                                             const ImportOptions& options = {});

// A checkpoint in hand; `eval` may be null. The recipe records `origin` and the step.
Result<registry::NewVersion> VersionFromCheckpoint(const CheckpointData& checkpoint,
                                                   const nlohmann::json* eval,
                                                   const std::string& origin, bool with_optimizer);

// model.init's weights: a registry version (*parent set to it) or a .safetensors file.
// Errors: the registry's and the file's.
Result<models::SafetensorsFile> ReadInitialWeights(const std::string& init,
                                                   const RegistryConfig& registry,
                                                   std::optional<registry::VersionId>* parent);

// A head (`model: {name: head}`) trained on stored features, made one version with the frozen
// backbone the features came from (the features manifest names it; serve/features.h): the
// backbone's weights up to the features' layer and the head's as its classifier (classifier.h
// names them alike), the architecture of the backbone with that classifier, and the backbone's
// config with its model section so (serving and evaluation cut videos as the backbone saw them);
// the head's own architecture and config go into the recipe, and a registered backbone becomes
// the parent. VersionFromCheckpoint applies it to every head run, so `reel train`'s registration,
// `reel models register RUN` and `reel serve RUN` see the combined model.
// Errors: FailedPrecondition when the features name no backbone or one without that layer;
// the dataset's, registry's and files' errors.
Status WithBackbone(const TrainConfig& config, registry::NewVersion* v);

// A finished run's last checkpoint as a new version of registry.model on registry.branch, with
// `parent` (model.init's version) as its lineage and registry.aliases pointed at it.
Result<registry::VersionInfo> RegisterTrainedModel(
    const TrainConfig& config, const CheckpointData& checkpoint, const nlohmann::json* eval,
    const std::optional<registry::VersionId>& parent);

// The run's best checkpoint (registry.best) as a version tagged checkpoint=best, with
// registry.best_alias pointed at it. When that alias already points at this run's best step, that
// version is returned and nothing is registered (a rerun of a finished run).
Result<registry::VersionInfo> RegisterBestModel(const TrainConfig& config,
                                                const CheckpointData& checkpoint,
                                                const nlohmann::json& eval,
                                                const std::optional<registry::VersionId>& parent);

nlohmann::json ArchitectureJson(const models::ModelSpec& spec);
// The inverse: a version's recorded architecture as a spec. InvalidArgument naming `source`.
Result<models::ModelSpec> SpecFromArchitecture(const nlohmann::json& architecture,
                                               const std::string& source);
// An eval report as a version's metrics: everything but the per-video predictions.
nlohmann::json MetricsJson(const nlohmann::json& eval_report);

}  // namespace reel::train
