// Internal to serve's LibTorch side (model_torch.cc, stages.cc): reading a Reel model's parts and
// running its forward passes. Not a contract; serve/model.h is.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/safetensors.h"
#include "serve/model.h"
#include "train/amp.h"

namespace reel::serve::internal {

// What a registry version and a checkpoint both give: weights, architecture, config, metrics.
struct Parts {
  models::SafetensorsFile weights;
  nlohmann::json architecture, metrics;
  std::string config;
  std::string name, version, source;
};

// A registry version (models:/...) or a run, checkpoint or .safetensors file (not TorchScript).
Result<Parts> ReadParts(const std::string& source, const LoadOptions& options);
bool IsTorchScriptPath(const std::string& path);

// The module with its weights, in eval mode, and what the server says about it.
struct ReelModule {
  torch::nn::AnyModule module;
  ModelInfo info;
};
Result<ReelModule> BuildReelModule(const Parts& parts);

// n samples of `shape` as a tensor over `input` (no copy).
torch::Tensor InputTensor(const float* input, int64_t n, const std::vector<int64_t>& shape);
// A tensor's values as FP32, row-major.
std::vector<float> FloatsOf(const torch::Tensor& t);
// An [n, classes] output's values; Internal for any other shape.
Result<std::vector<float>> LogitsOf(const torch::Tensor& output, int64_t n);

// Runs `forward` (in bf16 autocast when `bf16`) with LibTorch's errors turned into Status.
template <class Fn>
Result<std::vector<float>> Guarded(bool bf16, Fn&& forward) {
  try {
    c10::InferenceMode inference;
    train::AutocastGuard autocast(bf16, torch::kBFloat16, torch::DeviceType::CPU);
    return forward();
  } catch (const c10::Error& e) {
    return InternalError(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InternalError(std::string("forward: ") + e.what());
  }
}

// One forward pass of zeros: loads lazily initialised kernels now rather than on the first
// request, and tells the class count.
Result<int64_t> WarmUp(const Model& model, int64_t sample_size);
// WarmUp, and Internal when the scores are not one per class of the model's info.
Status CheckClasses(const Model& model);

// LoadModel with options.stages > 1 (stages.cc).
Result<std::unique_ptr<Model>> LoadStagedModel(const std::string& source,
                                               const LoadOptions& options);

}  // namespace reel::serve::internal
