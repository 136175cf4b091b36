#include "models/model_spec.h"

#include <algorithm>

namespace reel::models {

std::vector<std::string> ModelNames() {
  return {"r3d_18",   "mc3_18", "r2plus1d_18",  "r3d", "mc3",
          "r2plus1d", "tsn",    "single_frame", "head"};
}

Result<int> StageOfLayer(const std::string& layer) {
  if (layer == "avgpool") return 4;
  if (layer.size() == 6 && layer.compare(0, 5, "layer") == 0 && layer[5] >= '1' && layer[5] <= '4')
    return layer[5] - '0';
  return InvalidArgumentError("unknown layer '" + layer +
                              "' (expected layer1, layer2, layer3, layer4 or avgpool)");
}

int FeatureWidth(const ModelSpec& spec, int stage) {
  const int width = spec.width > 0 ? spec.width : 64;
  return width << (stage - 1);
}

namespace {

bool IsVideoResNet(const std::string& name) {
  return name != "tsn" && name != "single_frame" && name != "head";
}

// model.layer, model.hidden and model.in_features: where the classifier sits and its shape.
Status ReadClassifier(const ConfigNode& node, ModelSpec* spec) {
  if (node.Has("layer")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode layer, node.Child("layer"));
    if (!IsVideoResNet(spec->name)) return layer.Error("layer is for video ResNets only");
    REEL_ASSIGN_OR_RETURN(std::string name, node.GetString("layer"));
    auto stage = StageOfLayer(name);
    if (!stage.ok()) return layer.Error(stage.status().message());
    spec->head_stage = *stage;
  }
  if (node.Has("hidden")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode hidden, node.Child("hidden"));
    if (spec->name == "tsn" || spec->name == "single_frame")
      return hidden.Error("hidden is for video ResNets and heads only");
    REEL_ASSIGN_OR_RETURN(auto elements, hidden.Elements());
    if (elements.size() > 8) return hidden.Error("at most 8 hidden layers");
    for (const ConfigNode& e : elements) {
      REEL_ASSIGN_OR_RETURN(int64_t n, e.AsInt());
      if (n < 1 || n > 65536) return e.Error("hidden widths must be in [1, 65536]");
      spec->hidden.push_back(static_cast<int>(n));
    }
  }
  REEL_ASSIGN_OR_RETURN(int64_t in, node.GetInt("in_features", 0));
  if (in != 0 && spec->name != "head")
    return node.Child("in_features").value().Error("in_features is for name: head only");
  if (in < 0 || in > (1 << 20))
    return node.Child("in_features").value().Error("in_features must be in [1, 1048576]");
  spec->in_features = static_cast<int>(in);
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> ModelSpecFromConfig(const ConfigNode& node) {
  // `init` (the initial weights) is the trainer's to read: train_config.h.
  REEL_RETURN_IF_ERROR(node.CheckKeys(
      {"name", "num_classes", "width", "layers", "init", "layer", "hidden", "in_features"}));
  ModelSpec spec;
  REEL_ASSIGN_OR_RETURN(spec.name, node.GetString("name"));
  auto names = ModelNames();
  if (std::find(names.begin(), names.end(), spec.name) == names.end()) {
    REEL_ASSIGN_OR_RETURN(ConfigNode name, node.Child("name"));
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    return name.Error("unknown model '" + spec.name + "' (expected one of: " + known + ")");
  }
  REEL_ASSIGN_OR_RETURN(int64_t classes, node.GetInt("num_classes"));
  REEL_ASSIGN_OR_RETURN(int64_t width, node.GetInt("width", 0));
  if (classes < 1) return node.Child("num_classes").value().Error("num_classes must be at least 1");
  if (width < 0 || width > 1024)
    return node.Child("width").value().Error("width must be in [1, 1024]");
  spec.num_classes = static_cast<int>(classes);
  spec.width = static_cast<int>(width);
  if (node.Has("layers")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode layers, node.Child("layers"));
    REEL_ASSIGN_OR_RETURN(auto elements, layers.Elements());
    if (elements.size() != 4) return layers.Error("layers needs 4 block counts");
    for (size_t i = 0; i < 4; ++i) {
      REEL_ASSIGN_OR_RETURN(int64_t n, elements[i].AsInt());
      if (n < 1 || n > 64) return elements[i].Error("block counts must be in [1, 64]");
      spec.layers[i] = static_cast<int>(n);
    }
  }
  REEL_RETURN_IF_ERROR(ReadClassifier(node, &spec));
  return spec;
}

}  // namespace reel::models
