// Every model Reel trains, named in a config section (no LibTorch here: model_zoo.h builds it):
//   model:
//     name: r2plus1d        # r3d_18, mc3_18, r2plus1d_18 (torchvision's), r3d, mc3, r2plus1d
//                           # (width/layers below), tsn (per-frame 2D CNN, mean over time),
//                           # single_frame (2D CNN on the centre frame)
//     num_classes: 8
//     width: 16             # optional
//     layers: [1, 1, 1, 1]  # optional, video ResNets only
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
};

std::vector<std::string> ModelNames();
Result<ModelSpec> ModelSpecFromConfig(const ConfigNode& node);

}  // namespace reel::models
