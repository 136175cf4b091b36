#include "models/model_spec.h"

#include <algorithm>

namespace reel::models {

std::vector<std::string> ModelNames() {
  return {"r3d_18", "mc3_18", "r2plus1d_18", "r3d", "mc3", "r2plus1d", "tsn", "single_frame"};
}

Result<ModelSpec> ModelSpecFromConfig(const ConfigNode& node) {
  // `init` (the initial weights) is the trainer's to read: train_config.h.
  REEL_RETURN_IF_ERROR(node.CheckKeys({"name", "num_classes", "width", "layers", "init"}));
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
  return spec;
}

}  // namespace reel::models
