// LibTorch optimisers built from the config, with their state saved and restored by parameter
// name (LibTorch keys optimiser state by tensor address, which means nothing in another process).
// Parameter groups: with decay_norm_and_bias off (the default), 1-D parameters (batch-norm
// weights, biases) get no weight decay, as torchvision's reference recipes do.
// Thread-safety: one optimiser belongs to the training thread.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "models/safetensors.h"
#include "train/train_config.h"

namespace reel::train {

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(torch::nn::Module& model,
                                                       const OptimizerConfig& config);
// Over some of a model's parameters only (a pipeline stage's).
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const std::vector<torch::Tensor>& parameters,
                                                       const OptimizerConfig& config);

// Sets the learning rate of every parameter group.
void SetLearningRate(torch::optim::Optimizer& optimizer, double lr);

// The optimiser's per-parameter state as tensors named "<param>.<field>" added to `out`
// (momentum_buffer for SGD; step, exp_avg, exp_avg_sq for AdamW), under `prefix`.
void SaveOptimizerState(const torch::optim::Optimizer& optimizer, const torch::nn::Module& model,
                        const std::string& prefix, models::SafetensorsFile* out);
// Restores what SaveOptimizerState wrote. InvalidArgument naming the tensor when one is missing
// for a parameter that has state in the file, mis-shaped, or belongs to no parameter of `model`.
// State of the model's parameters that the optimiser does not hold (another pipeline stage's) is
// skipped, so every stage loads its part from one file.
Status LoadOptimizerState(torch::optim::Optimizer& optimizer, const torch::nn::Module& model,
                          const std::string& prefix, const models::SafetensorsFile& file);

}  // namespace reel::train
