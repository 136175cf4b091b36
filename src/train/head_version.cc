// A head trained on stored features, registered with the frozen backbone they came from as one
// version (registration.h, WithBackbone).
#include <optional>
#include <string>
#include <vector>

#include "dataset/manifest.h"
#include "registry/model_uri.h"
#include "registry/views.h"
#include "storage/open.h"
#include "train/registration.h"

namespace reel::train {
namespace {

// The backbone a features dataset records (serve/features.h): its version's weights,
// architecture and config, and its registry id when it is a registered version.
struct Backbone {
  registry::NewVersion parts;
  std::optional<registry::VersionId> id;
  std::string source, layer;
};

Result<Backbone> BackboneOf(const TrainConfig& config) {
  REEL_ASSIGN_OR_RETURN(auto store, storage::OpenStore(config.data.dataset));
  REEL_ASSIGN_OR_RETURN(dataset::Manifest manifest, dataset::Manifest::Read(*store, ""));
  const nlohmann::json& f = manifest.features;
  Backbone b;
  b.layer = f.value("layer", "avgpool");
  b.source = f.contains("model") && f["model"].is_object() ? f["model"].value("source", "") : "";
  if (b.source.empty()) {
    return FailedPreconditionError(config.data.dataset +
                                   ": the features record no backbone (features.model.source)");
  }
  if (!registry::IsModelUri(b.source)) {
    ImportOptions import;
    import.config = f["model"].value("config", "");
    REEL_ASSIGN_OR_RETURN(b.parts, VersionFromPath(b.source, import));
    return b;
  }
  REEL_ASSIGN_OR_RETURN(auto reg,
                        registry::OpenRegistry(registry::RegistryUriOrDefault(config.registry.uri),
                                               config.registry.chunks));
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo version, reg->Get(b.source));
  REEL_ASSIGN_OR_RETURN(b.parts.weights, reg->PullWeights(version));
  b.parts.architecture = version.architecture;
  b.parts.config = version.config;
  b.id = version.id;
  return b;
}

// Stage K's parameters are "layerK.…"; the classifier's "fc…".
bool KeptFromBackbone(const std::string& name, int stage) {
  if (name.compare(0, 2, "fc") == 0) return false;
  for (int k = stage + 1; k <= 4; ++k) {
    if (name.compare(0, 7, "layer" + std::to_string(k) + ".") == 0) return false;
  }
  return true;
}

// The backbone's config with its model section turned into the combined architecture, so that
// serving and evaluation cut videos as the backbone was trained to see them.
Result<std::string> CombinedConfig(const std::string& backbone_config,
                                   const models::ModelSpec& spec, const std::string& head_config) {
  if (backbone_config.empty()) return head_config;
  std::string hidden;
  for (int h : spec.hidden) hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
  return ApplyConfigOverrides(
      backbone_config,
      {"model.num_classes=" + std::to_string(spec.num_classes),
       "model.layer=layer" + std::to_string(spec.head_stage), "model.hidden=[" + hidden + "]"});
}

}  // namespace

Status WithBackbone(const TrainConfig& config, registry::NewVersion* v) {
  REEL_ASSIGN_OR_RETURN(Backbone b, BackboneOf(config));
  REEL_ASSIGN_OR_RETURN(models::ModelSpec spec,
                        SpecFromArchitecture(b.parts.architecture, b.source));
  if (spec.name == "tsn" || spec.name == "single_frame" || spec.name == "head") {
    return FailedPreconditionError("backbone " + b.source + " is a '" + spec.name +
                                   "' model; heads sit on video ResNets");
  }
  REEL_ASSIGN_OR_RETURN(int stage, models::StageOfLayer(b.layer));
  if (stage > spec.head_stage) {
    return FailedPreconditionError("backbone " + b.source + " has no " + b.layer);
  }
  spec.num_classes = config.model.num_classes;
  spec.head_stage = stage;
  spec.hidden = config.model.hidden;
  models::SafetensorsFile weights;
  for (auto& [name, tensor] : b.parts.weights.tensors) {
    if (KeptFromBackbone(name, stage)) weights.tensors[name] = std::move(tensor);
  }
  for (auto& [name, tensor] : v->weights.tensors) weights.tensors[name] = std::move(tensor);
  REEL_ASSIGN_OR_RETURN(std::string combined, CombinedConfig(b.parts.config, spec, v->config));
  v->recipe = {{"op", "head"},
               {"backbone", b.source},
               {"layer", b.layer},
               {"features", config.data.dataset},
               {"head", v->architecture},
               {"head_config", v->config},
               {"step", v->recipe.value("step", int64_t{0})}};
  v->weights = std::move(weights);
  v->architecture = ArchitectureJson(spec);
  v->config = std::move(combined);
  if (b.id) v->parents.push_back(*b.id);
  return Status::Ok();
}

}  // namespace reel::train
