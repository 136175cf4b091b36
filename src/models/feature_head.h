// A classifier alone (`model: {name: head}`), trained on the pooled features `reel features`
// stored (serve/features.h) instead of on videos: input [B, D] or [B, D, 1, 1, 1] (the loader's
// feature batches), output [B, num_classes]. Its parameters are named as a video ResNet's
// classifier (classifier.h), so the head and the frozen backbone register as one version.
// Thread-safety: as torch::nn modules.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/classifier.h"

namespace reel::models {

struct FeatureHeadOptions {
  int in_features = 0;
  std::vector<int> hidden;  // empty: one Linear
  int num_classes = 0;
};

class FeatureHeadImpl : public torch::nn::Module {
 public:
  explicit FeatureHeadImpl(const FeatureHeadOptions& options);
  torch::Tensor forward(torch::Tensor x);

 private:
  Classifier fc_;
};
TORCH_MODULE(FeatureHead);

}  // namespace reel::models
