// Every model Reel trains, named in a config section (no LibTorch here: model_zoo.h builds it):
//   model:
//     name: r2plus1d        # r3d_18, mc3_18, r2plus1d_18 (torchvision's), r3d, mc3, r2plus1d
//                           # (width/layers below), tsn (per-frame 2D CNN, mean over time),
//                           # single_frame (2D CNN on the centre frame)
//     num_classes: 8
//     width: 16             # optional
//     layers: [1, 1, 1, 1]  # optional, video ResNets only
//     layer: layer4         # optional, video ResNets only: the stage the classifier sits on
//                           # (layer1..layer4; the later stages are left out)
//     hidden: [256]         # optional: the classifier's hidden widths (an MLP with ReLU);
//                           # none: one Linear, torchvision's `fc`
//   or a classifier alone, trained on the features `reel features` stored (serve/features.h):
//   model: {name: head, num_classes: 8, hidden: [], in_features: 0}  # 0: the dataset's width
// Errors: InvalidArgument naming the config file, line and key (unknown name, bad numbers,
// unknown keys).
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"

namespace reel::models {

struct ModelSpec {
  std::string name = "r2plus1d_18";
  int num_classes = 400;
  int width = 0;  // 0: the architecture's default
  std::array<int, 4> layers = {2, 2, 2, 2};
  int head_stage = 4;       // video ResNets: the stage (1-4) whose pooled output is classified
  std::vector<int> hidden;  // the classifier's hidden widths; empty: one Linear
  int in_features = 0;      // head: the stored features' width (0: not known yet)
};

// "layer1".."layer4" (and "avgpool", the pooled output of the last stage, which the classifier
// reads) as the stage number. InvalidArgument for any other name.
Result<int> StageOfLayer(const std::string& layer);
// The pooled output's width at `stage` of a video ResNet of `width` (0: the default, 64).
int FeatureWidth(const ModelSpec& spec, int stage);

std::vector<std::string> ModelNames();
Result<ModelSpec> ModelSpecFromConfig(const ConfigNode& node);

}  // namespace reel::models
