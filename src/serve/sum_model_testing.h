// Tests only: a model without LibTorch for the service's and predict's tests. Samples of shape
// [3, 1, 2, 2]; three classes, "up", "down", "flat", scored (sum, -sum, 0); videos are cut into
// clips of 2 frames at short side 4 and scored by 2 clips of 1 frame, 2 x 2.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "serve/model.h"

namespace reel::serve {

class SumModel : public Model {
 public:
  explicit SumModel(std::string name, std::string version = "1") {
    info_.name = std::move(name);
    info_.version = std::move(version);
    info_.source = "memory";
    info_.platform = "test";
    info_.architecture = "sum";
    info_.sample_shape = {3, 1, 2, 2};
    info_.class_names = {"up", "down", "flat"};
    info_.video.ingest.clip_frames = 2;
    info_.video.ingest.short_side = 4;
    info_.video.clip.frames = 1;
    info_.video.transform.size = 2;
    info_.video.clips = 2;
  }
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    std::vector<float> out;
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int64_t j = 0; j < 12; ++j) sum += input[i * 12 + j];
      out.insert(out.end(), {sum, -sum, 0.f});
    }
    return out;
  }
};

}  // namespace reel::serve
