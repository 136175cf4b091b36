// Internal to train: what training and evaluation share (the device and precision a config
// asks for, its dataset's store, the evaluation loop). Not a public contract.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "loader/loader.h"
#include "storage/object_store.h"
#include "train/metrics.h"
#include "train/train_config.h"

namespace reel::train::internal {

// The device the config asks for. InvalidArgument when it asks for CUDA that is not there.
// In a data-parallel job on CUDA, "auto" and "cuda" mean the GPU of this process's local rank.
Result<torch::Device> ResolveDevice(const std::string& name, int local_rank = 0);

struct Precision {
  bool autocast = false;
  torch::ScalarType dtype = torch::kFloat;
  bool scale_loss = false;
  torch::DeviceType device_type = torch::kCPU;  // whose autocast switch
};

// What train.amp means on `device`: auto is fp16 on CUDA, bf16 on a CPU with native bf16 math
// (CpuHasNativeBf16), fp32 elsewhere; bf16 on any CPU. InvalidArgument for fp16 on the CPU.
Result<Precision> ResolvePrecision(AmpMode mode, const torch::Device& device);
// "fp32", "bf16 autocast", ... for the run's first log line.
std::string PrecisionName(const Precision& p);

// The dataset's store, through the config's cache when it names one.
Result<std::unique_ptr<storage::ObjectStore>> OpenDataset(const TrainConfig& config);

// The config's model with what its dataset decides: a head's input width is the stored
// features' width. InvalidArgument for a head on a dataset of clips, a video model on features,
// or a model.in_features the features do not have; the manifest's errors.
Result<models::ModelSpec> ModelForDataset(const TrainConfig& config, storage::ObjectStore& store);

// Clip-level and video-level metrics of `model` on one split. The loader pads the last batch
// with repeats; those are recognised by key and counted once.
Result<EvalReport> Evaluate(torch::nn::AnyModule& model, torch::nn::Module& module,
                            const torch::Device& device, const Precision& precision,
                            storage::ObjectStore& store, const loader::LoaderOptions& options,
                            int num_classes);

}  // namespace reel::train::internal
