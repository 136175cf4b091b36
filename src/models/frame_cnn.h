// Frame-level baselines that cannot see motion: a small 2D CNN applied to every frame with the
// per-frame features averaged over time (TSN style), or to the centre frame only. On datasets
// whose classes differ only in the order of frames (datagen's), they stay near chance, which is
// what makes them useful controls for the video models.
// Thread-safety: as torch::nn modules.
#pragma once

#include <torch/torch.h>

namespace reel::models {

struct FrameCnnOptions {
  int num_classes = 400;
  int width = 32;  // channels of the first stage; 2x and 4x after
  bool centre_frame_only = false;
};

// Input [B, 3, T, H, W], output [B, num_classes].
class FrameCnnImpl : public torch::nn::Module {
 public:
  explicit FrameCnnImpl(const FrameCnnOptions& options);
  torch::Tensor forward(torch::Tensor x);

 private:
  FrameCnnOptions options_;
  torch::nn::Sequential features{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(FrameCnn);

}  // namespace reel::models
