#include "models/model_zoo.h"

#include "models/feature_head.h"
#include "models/frame_cnn.h"
#include "models/video_resnet.h"

namespace reel::models {

Result<torch::nn::AnyModule> BuildModel(const ModelSpec& spec) {
  if (spec.num_classes < 1) return InvalidArgumentError("num_classes must be at least 1");
  const std::string& n = spec.name;
  if (n == "tsn" || n == "single_frame") {
    FrameCnnOptions o;
    o.num_classes = spec.num_classes;
    if (spec.width > 0) o.width = spec.width;
    o.centre_frame_only = n == "single_frame";
    return torch::nn::AnyModule(FrameCnn(o));
  }
  if (n == "head") {
    if (spec.in_features < 1) {
      return InvalidArgumentError(
          "model head: in_features unknown (it is the width of the features dataset it trains "
          "on)");
    }
    return torch::nn::AnyModule(
        FeatureHead(FeatureHeadOptions{spec.in_features, spec.hidden, spec.num_classes}));
  }
  VideoResNetOptions o;
  o.num_classes = spec.num_classes;
  bool torchvision = n.size() > 3 && n.substr(n.size() - 3) == "_18";
  std::string base = torchvision ? n.substr(0, n.size() - 3) : n;
  if (base == "r3d")
    o.arch = VideoArch::kR3D;
  else if (base == "mc3")
    o.arch = VideoArch::kMC3;
  else if (base == "r2plus1d")
    o.arch = VideoArch::kR2Plus1D;
  else
    return InvalidArgumentError("unknown model '" + n + "'");
  if (!torchvision) {
    if (spec.width > 0) o.width = spec.width;
    o.layers = spec.layers;
  }
  if (spec.head_stage < 1 || spec.head_stage > 4)
    return InvalidArgumentError("the classifier's stage must be 1 to 4");
  o.head_stage = spec.head_stage;
  o.hidden = spec.hidden;
  return torch::nn::AnyModule(VideoResNet(o));
}

}  // namespace reel::models
