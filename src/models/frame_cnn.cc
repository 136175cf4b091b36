#include "models/frame_cnn.h"

namespace reel::models {
namespace {

namespace nn = torch::nn;

void Stage(nn::Sequential& seq, int in, int out, int stride) {
  seq->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
  seq->push_back(nn::BatchNorm2d(out));
  seq->push_back(nn::ReLU(nn::ReLUOptions(true)));
}

}  // namespace

FrameCnnImpl::FrameCnnImpl(const FrameCnnOptions& o) : options_(o) {
  const int w = o.width;
  nn::Sequential seq;
  Stage(seq, 3, w, 2);
  Stage(seq, w, w, 1);
  Stage(seq, w, 2 * w, 2);
  Stage(seq, 2 * w, 2 * w, 1);
  Stage(seq, 2 * w, 4 * w, 2);
  Stage(seq, 4 * w, 4 * w, 1);
  seq->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
  features = register_module("features", seq);
  fc = register_module("fc", nn::Linear(4 * w, o.num_classes));
}

torch::Tensor FrameCnnImpl::forward(torch::Tensor x) {
  const int64_t b = x.size(0), t = x.size(2);
  if (options_.centre_frame_only) {
    x = x.select(2, t / 2);  // [B, 3, H, W]
    return fc->forward(features->forward(x).flatten(1));
  }
  // [B, 3, T, H, W] -> [B*T, 3, H, W]: every frame on its own, then the mean over time.
  x = x.transpose(1, 2).reshape({b * t, x.size(1), x.size(3), x.size(4)});
  torch::Tensor per_frame = features->forward(x).flatten(1).view({b, t, -1});
  return fc->forward(per_frame.mean(1));
}

}  // namespace reel::models
