#include "models/classifier.h"

#include "models/feature_head.h"

namespace reel::models {

Classifier::Classifier(torch::nn::Module& owner, int in, const std::vector<int>& hidden,
                       int classes) {
  if (hidden.empty()) {
    linear_ = owner.register_module("fc", torch::nn::Linear(in, classes));
    return;
  }
  torch::nn::Sequential mlp;
  for (int width : hidden) {
    mlp->push_back(torch::nn::Linear(in, width));
    mlp->push_back(torch::nn::ReLU(torch::nn::ReLUOptions(true)));
    in = width;
  }
  mlp->push_back(torch::nn::Linear(in, classes));
  mlp_ = owner.register_module("fc", mlp);
}

torch::Tensor Classifier::operator()(const torch::Tensor& x) {
  return linear_ ? linear_->forward(x) : mlp_->forward(x);
}

FeatureHeadImpl::FeatureHeadImpl(const FeatureHeadOptions& options)
    : fc_(*this, options.in_features, options.hidden, options.num_classes) {}

// NOLINTNEXTLINE(performance-unnecessary-value-param): LibTorch modules take tensors by value
torch::Tensor FeatureHeadImpl::forward(torch::Tensor x) { return fc_(x.flatten(1)); }

}  // namespace reel::models
