#include "train/evaluation.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dataset/manifest.h"
#include "loader/torch_batch.h"
#include "models/model_zoo.h"
#include "models/state_dict.h"
#include "storage/open.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/registration.h"
#include "train/trainer.h"

namespace reel::train {
namespace {

// Clip keys are "<video>_cNNN"; clips of one video share the part before the suffix.
std::string VideoKeyOf(const std::string& clip_key) {
  size_t at = clip_key.rfind("_c");
  if (at == std::string::npos || at + 2 == clip_key.size()) return clip_key;
  for (size_t i = at + 2; i < clip_key.size(); ++i) {
    if (clip_key[i] < '0' || clip_key[i] > '9') return clip_key;
  }
  return clip_key.substr(0, at);
}

}  // namespace

namespace internal {

Result<torch::Device> ResolveDevice(const std::string& name, int local_rank) {
  const bool cuda = torch::cuda::is_available();
  const int local_gpu =
      cuda ? local_rank % std::max<int>(1, static_cast<int>(torch::cuda::device_count())) : 0;
  if (name == "auto")
    return cuda ? torch::Device(torch::kCUDA, local_gpu) : torch::Device(torch::kCPU);
  if (name == "cuda" && cuda) return torch::Device(torch::kCUDA, local_gpu);
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (!cuda) {
    return InvalidArgumentError(
        "device '" + name +
        "' asked for, but this LibTorch sees no CUDA device (use device: cpu or auto)");
  }
  try {
    torch::Device device(name);
    if (device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count())) {
      return InvalidArgumentError("device '" + name + "': only " +
                                  std::to_string(torch::cuda::device_count()) +
                                  " CUDA devices are present");
    }
    return device;
  } catch (const c10::Error&) {
    return InvalidArgumentError("device '" + name +
                                "' is not a device name (expected cpu, cuda or cuda:N)");
  }
}

Result<Precision> ResolvePrecision(AmpMode mode, const torch::Device& device) {
  Precision p;
  p.device_type = device.type();
  const bool cpu_bf16 = !device.is_cuda() &&
                        (mode == AmpMode::kBf16 || (mode == AmpMode::kAuto && CpuHasNativeBf16()));
  if (mode == AmpMode::kOff || (mode == AmpMode::kAuto && !device.is_cuda() && !cpu_bf16)) {
    return p;
  }
  if (!device.is_cuda() && mode == AmpMode::kFp16) {
    return InvalidArgumentError(
        "train.amp: fp16 autocast needs a CUDA device; this run is on the CPU (use amp: bf16, "
        "auto or off)");
  }
  p.autocast = true;
  p.dtype = cpu_bf16 || mode == AmpMode::kBf16 ? torch::kBFloat16 : torch::kHalf;
  p.scale_loss = p.dtype == torch::kHalf;  // bf16 has fp32's range: no scaling needed
  return p;
}

std::string PrecisionName(const Precision& p) {
  if (!p.autocast) return "fp32";
  std::string name = p.dtype == torch::kHalf ? "fp16 autocast" : "bf16 autocast";
  if (p.device_type == torch::kCPU && !CpuHasNativeBf16()) {
    name += " (emulated: this CPU has no AVX512-BF16 or AMX, amp: off is faster)";
  }
  return name;
}

Result<std::unique_ptr<storage::ObjectStore>> OpenDataset(const TrainConfig& config) {
  storage::StoreOpenOptions open;
  open.cache_directory = config.data.cache_dir;
  return storage::OpenStore(config.data.dataset, open);
}

Result<models::ModelSpec> ModelForDataset(const TrainConfig& config, storage::ObjectStore& store) {
  models::ModelSpec spec = config.model;
  REEL_ASSIGN_OR_RETURN(dataset::Manifest manifest, dataset::Manifest::Read(store, ""));
  const bool features = manifest.mode == dataset::DatasetMode::kFeatures;
  if (spec.name != "head" && features) {
    return InvalidArgumentError(config.data.dataset +
                                " holds features (reel features): train model name 'head' on it, "
                                "not '" +
                                spec.name + "'");
  }
  if (spec.name != "head") return spec;
  if (!features) {
    return InvalidArgumentError("model head trains on stored features (reel features), and " +
                                config.data.dataset + " holds " +
                                std::string(dataset::DatasetModeName(manifest.mode)));
  }
  const int64_t dim = manifest.feature_dim();
  if (spec.in_features != 0 && spec.in_features != dim) {
    return InvalidArgumentError("model.in_features is " + std::to_string(spec.in_features) +
                                " but the features of " + config.data.dataset + " are " +
                                std::to_string(dim) + " wide");
  }
  spec.in_features = static_cast<int>(dim);
  return spec;
}

Result<EvalReport> Evaluate(torch::nn::AnyModule& model, torch::nn::Module& module,
                            const torch::Device& device, const Precision& precision,
                            storage::ObjectStore& store, const loader::LoaderOptions& options,
                            int num_classes) {
  REEL_ASSIGN_OR_RETURN(auto loader, loader::Loader::Open(store, options));
  REEL_RETURN_IF_ERROR(loader->Start({options.plan.seed, 0, 0}));
  if (static_cast<int>(loader->class_names().size()) != num_classes) {
    return InvalidArgumentError("split '" + options.split + "' has " +
                                std::to_string(loader->class_names().size()) +
                                " classes but the model has " + std::to_string(num_classes));
  }
  const bool was_training = module.is_training();
  module.eval();
  torch::NoGradGuard no_grad;
  Evaluator evaluator(num_classes);
  std::set<std::string> seen;
  while (true) {
    REEL_ASSIGN_OR_RETURN(auto batch, loader->Next());
    if (!batch) break;
    // Clips per sample: the options' for videos, one for a features dataset's embeddings.
    const size_t per_sample = batch->labels.size() / static_cast<size_t>(options.batch_size);
    std::vector<std::string> keys =
        std::move(batch->keys);  // ToTensors needs only pixels and labels
    std::vector<int> labels = batch->labels;
    loader::TensorBatch tensors = loader::ToTensors(std::move(*batch));
    torch::Tensor logits;
    {
      AutocastGuard autocast(precision.autocast, precision.dtype, precision.device_type);
      logits = model.forward(tensors.clips.to(device, /*non_blocking=*/true));
    }
    torch::Tensor scores = logits.to(torch::kFloat).softmax(1).to(torch::kCPU).contiguous();
    const float* s = scores.data_ptr<float>();
    for (size_t i = 0; i * per_sample < keys.size(); ++i) {
      const std::string& key = keys[i * per_sample];
      if (!seen.insert(key).second) continue;
      for (size_t c = 0; c < per_sample; ++c) {
        size_t row = i * per_sample + c;
        std::vector<float> clip_scores(s + row * num_classes, s + (row + 1) * num_classes);
        REEL_RETURN_IF_ERROR(evaluator.Add(clip_scores, labels[row], VideoKeyOf(key)));
      }
    }
  }
  if (was_training) module.train();
  EvalReport report = evaluator.Report();
  report.class_names = loader->class_names();
  return report;
}

}  // namespace internal

using internal::Evaluate;
using internal::ModelForDataset;
using internal::OpenDataset;
using internal::Precision;
using internal::ResolveDevice;
using internal::ResolvePrecision;

namespace {

// The weights options name (a registered version or file) or else a checkpoint, and what to call
// them in errors.
Result<models::SafetensorsFile> WeightsToEvaluate(const TrainConfig& config,
                                                  const EvalOptions& options, std::string* source) {
  if (!options.weights.empty()) {
    *source = options.weights;
    std::optional<registry::VersionId> version;
    return ReadInitialWeights(options.weights, config.registry, &version);
  }
  REEL_ASSIGN_OR_RETURN(auto checkpoints, CheckpointStore::Open(options.checkpoint_uri.empty()
                                                                    ? config.checkpoint_uri
                                                                    : options.checkpoint_uri));
  REEL_ASSIGN_OR_RETURN(CheckpointData cp, checkpoints.Load(options.step));
  *source = "checkpoint step " + std::to_string(cp.step) + " at " + checkpoints.uri();
  return std::move(cp.model);
}

}  // namespace

Result<EvalReport> RunEvaluation(const TrainConfig& config, const EvalOptions& options) {
  try {
    if (config.threads > 0) torch::set_num_threads(config.threads);
    REEL_ASSIGN_OR_RETURN(torch::Device device, ResolveDevice(config.device));
    REEL_ASSIGN_OR_RETURN(Precision precision, ResolvePrecision(config.amp, device));
    std::string source;
    REEL_ASSIGN_OR_RETURN(models::SafetensorsFile weights,
                          WeightsToEvaluate(config, options, &source));
    REEL_ASSIGN_OR_RETURN(auto store, OpenDataset(config));
    REEL_ASSIGN_OR_RETURN(models::ModelSpec spec, ModelForDataset(config, *store));
    REEL_ASSIGN_OR_RETURN(torch::nn::AnyModule model, models::BuildModel(spec));
    std::shared_ptr<torch::nn::Module> module = model.ptr();
    Status loaded = models::LoadStateDict(*module, weights);
    if (!loaded.ok()) {
      return FailedPreconditionError(source + " does not fit model '" + config.model.name +
                                     "': " + loaded.message());
    }
    module->to(device);
    loader::LoaderOptions eval =
        config.EvalLoaderOptions(options.split.empty() ? config.data.val_split : options.split);
    if (options.eval_clips > 0) {
      eval.clip.clips_per_video = options.eval_clips;
      eval.clip.sampling =
          options.eval_clips > 1 ? loader::ClipSampling::kUniform : loader::ClipSampling::kCenter;
    }
    return Evaluate(model, *module, device, precision, *store, eval, config.model.num_classes);
  } catch (const c10::Error& e) {
    return InternalError(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InternalError(std::string("evaluation: ") + e.what());
  }
}

}  // namespace reel::train
