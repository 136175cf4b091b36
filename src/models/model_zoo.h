// Builds every model that model_spec.h names, as a LibTorch module.
// Errors: InvalidArgument for an unknown name or a class count below 1.
// Thread-safety: pure functions.
#pragma once

#include <torch/torch.h>

#include "base/status.h"
#include "models/model_spec.h"

namespace reel::models {

// A module whose forward maps [B, 3, T, H, W] to [B, num_classes].
Result<torch::nn::AnyModule> BuildModel(const ModelSpec& spec);

}  // namespace reel::models
