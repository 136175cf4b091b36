// The video ResNets of torchvision.models.video — R3D-18, MC3-18, R(2+1)D-18 — in LibTorch C++,
// with the same layers and parameter names, so a torchvision state_dict saved as safetensors
// loads unchanged and gives the same logits. Width and depth options make small CPU-sized
// variants (width 64 and layers {2,2,2,2} are torchvision's *_18 models).
// Thread-safety: as torch::nn modules (one forward/backward at a time per module).
#pragma once

#include <torch/torch.h>

#include <array>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/classifier.h"

namespace reel::models {

enum class VideoArch { kR3D, kMC3, kR2Plus1D };

struct VideoResNetOptions {
  VideoArch arch = VideoArch::kR2Plus1D;
  int num_classes = 400;
  std::array<int, 4> layers = {2, 2, 2, 2};  // blocks per stage
  int width = 64;                            // channels of the first stage; then 2x, 4x, 8x
  // The classifier reads the pooled output of this stage (1-4); later stages are not built.
  int head_stage = 4;
  std::vector<int> hidden;  // the classifier's hidden widths (classifier.h); empty: torchvision's
};

// Input [B, 3, T, H, W] float, output [B, num_classes] logits.
class VideoResNetImpl : public torch::nn::Module {
 public:
  explicit VideoResNetImpl(const VideoResNetOptions& options);
  torch::Tensor forward(torch::Tensor x);
  // The output of stage `stage` (1 to options().head_stage), averaged over time and space:
  // [B, width << (stage - 1)]. At head_stage it is what the classifier reads.
  torch::Tensor features(torch::Tensor x, int stage);
  const VideoResNetOptions& options() const { return options_; }

  // The model as a chain of units, for pipeline stages: the stem, each residual block of the
  // built layers ("layer2.1"), and the head (pooling and classifier). Running units [0, n) in
  // order is forward(); [begin, end) takes the output of unit begin-1.
  int unit_count() const { return static_cast<int>(units_.size()); }
  const std::string& unit_name(int unit) const { return units_.at(unit).name; }
  torch::Tensor forward_units(torch::Tensor x, int begin, int end);
  // Whether parameter `name` (as named_parameters() gives it) belongs to `unit`.
  bool UnitOwns(int unit, const std::string& name) const;
  // The parameters of `unit`, in named_parameters() order.
  std::vector<torch::Tensor> UnitParameters(int unit) const;

 private:
  VideoResNetOptions options_;
  torch::nn::Sequential stem{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::AdaptiveAvgPool3d avgpool{nullptr};
  Classifier fc;
  struct Unit {
    std::string name;
    int layer = 0;  // 0: the stem; 1-4: a block of that layer; 5: the head
    size_t block = 0;
  };
  torch::Tensor RunUnit(const Unit& unit, torch::Tensor x);
  std::vector<Unit> units_;
};
TORCH_MODULE(VideoResNet);

}  // namespace reel::models
