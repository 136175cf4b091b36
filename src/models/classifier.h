// The classifier at the end of Reel's video ResNets, and of a head trained on stored features:
// one Linear (torchvision's `fc`: fc.weight, fc.bias) or, with hidden widths, an MLP (Linear,
// ReLU, ..., Linear: fc.0.weight, fc.2.weight, ...), registered as `fc` on its owner. Because a
// head and a backbone name their classifiers alike, a head trained on a backbone's features and
// that backbone's other weights are one state dict (train/registration.h combines them).
// Thread-safety: as torch::nn modules.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace reel::models {

class Classifier {
 public:
  Classifier() = default;
  // Registers the layers on `owner` as "fc".
  Classifier(torch::nn::Module& owner, int in, const std::vector<int>& hidden, int classes);
  torch::Tensor operator()(const torch::Tensor& x);

 private:
  torch::nn::Linear linear_{nullptr};
  torch::nn::Sequential mlp_{nullptr};
};

}  // namespace reel::models
