// BatchNorm3d, optionally followed by a ReLU, with LibTorch's parameters, buffers, state-dict
// names and results, computed in two passes over memory when training on the CPU.
//
// LibTorch 1.13's CPU batch norm reads its input three times (mean, variance, normalise) and
// the ReLU after it two more, forward and backward: on R(2+1)D-18 batch norm took 26% of the
// forward and 15% of the backward, a normalisation of 7 M values costing 9x a ReLU over them.
// Here the statistics are one pass (sums shifted by the channel's first value, so large means
// keep their precision) and normalise + ReLU the second; backward is one pass for the two sums
// and one for the gradient, the ReLU's mask recomputed from the input. Where the fused kernels
// do not apply (evaluation, not float32, not contiguous, not on the CPU, no AVX2 + FMA) it is
// torch::batch_norm then relu_, exactly LibTorch's BatchNorm3d + ReLU.
#pragma once

#include <torch/torch.h>

namespace reel::models {

struct BatchNormReluOptions {
  int64_t features = 0;
  bool relu = true;  // false: batch norm alone
  double eps = 1e-5;
  double momentum = 0.1;
};

class BatchNormReluImpl : public torch::nn::Module {
 public:
  explicit BatchNormReluImpl(BatchNormReluOptions options);
  // LibTorch modules take forward's tensor by value (AnyModule forwards it so).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  torch::Tensor forward(torch::Tensor x);

  // The same names as torch::nn::BatchNorm3d's (and torchvision's), so weights load unchanged.
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  BatchNormReluOptions options_;
};
TORCH_MODULE(BatchNormRelu);

// Whether training on `x` takes the fused kernels (for tests and benchmarks).
bool FusedBatchNormApplies(const torch::Tensor& x);

}  // namespace reel::models
