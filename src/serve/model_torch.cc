// LoadModel with LibTorch: Reel's architectures from registry versions and checkpoints, and
// TorchScript files. LibTorch's exceptions stop here.
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "base/config.h"
#include "base/files.h"
#include "base/logging.h"
#include "dataset/manifest.h"
#include "models/model_spec.h"
#include "models/model_zoo.h"
#include "models/state_dict.h"
#include "models/video_resnet.h"
#include "registry/model_uri.h"
#include "registry/registry.h"
#include "registry/views.h"
#include "serve/model.h"
#include "serve/model_torch_internal.h"
#include "storage/open.h"
#include "train/amp.h"
#include "train/registration.h"

namespace reel::serve {
namespace internal {
namespace {

namespace fs = std::filesystem;

Result<Parts> PartsFromRegistry(const std::string& uri, const LoadOptions& options) {
  REEL_ASSIGN_OR_RETURN(
      auto registry, registry::OpenRegistry(registry::RegistryUriOrDefault(options.registry), ""));
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo version, registry->Get(uri));
  Parts parts;
  REEL_ASSIGN_OR_RETURN(parts.weights, registry->PullWeights(version));
  parts.architecture = version.architecture;
  parts.metrics = version.metrics;
  parts.config = version.config;
  parts.name = version.id.model;
  parts.version = std::to_string(version.id.version);
  parts.source = version.id.ToString();
  return parts;
}

// A folder's name, or a file's name without its extension ("runs/r2/" -> "r2").
std::string StemOf(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  if (p.empty()) return "model";
  return fs::is_directory(p) ? p.filename().string() : p.stem().string();
}

Result<Parts> PartsFromPath(const std::string& path, const LoadOptions& options) {
  if (!fs::exists(path)) return NotFoundError("no such model file or folder: '" + path + "'");
  train::ImportOptions import;
  import.config = options.config;
  REEL_ASSIGN_OR_RETURN(registry::NewVersion v, train::VersionFromPath(path, import));
  Parts parts;
  parts.weights = std::move(v.weights);
  parts.architecture = std::move(v.architecture);
  parts.metrics = std::move(v.metrics);
  parts.config = std::move(v.config);
  parts.name = StemOf(path);
  parts.version = "1";
  parts.source = path;
  return parts;
}

// The ingest settings of the training dataset when its manifest can be read; otherwise clips of
// exactly the frames evaluation takes, at the crop size.
ingest::ClipSettings IngestSettingsOf(const std::string& dataset, const loader::ClipOptions& clip,
                                      int size) {
  ingest::ClipSettings cut;
  cut.clip_frames = clip.frames * clip.stride;
  cut.short_side = size;
  if (dataset.empty()) return cut;
  auto store = storage::OpenStore(dataset);
  if (!store.ok()) return cut;
  auto manifest = dataset::Manifest::Read(**store, "");
  if (manifest.ok()) ApplyManifestClipSettings(manifest->clip_settings, &cut);
  return cut;
}

// Input shape [3, clip_frames, size, size] and the video path, from the config's data section
// (the defaults without one).
Status ApplyDataConfig(const std::string& config, const std::string& source, ModelInfo* info) {
  int64_t frames = 8, stride = 1, size = 112;
  std::string dataset;
  if (!config.empty()) {
    REEL_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadString(config, source + " (config)"));
    if (root.Has("data")) {
      REEL_ASSIGN_OR_RETURN(ConfigNode data, root.Child("data"));
      REEL_ASSIGN_OR_RETURN(frames, data.GetInt("clip_frames", frames));
      REEL_ASSIGN_OR_RETURN(stride, data.GetInt("frame_stride", stride));
      REEL_ASSIGN_OR_RETURN(size, data.GetInt("size", size));
      REEL_ASSIGN_OR_RETURN(dataset, data.GetString("dataset", ""));
    }
  }
  if (frames < 1 || stride < 1 || size < 1 || frames > 4096 || size > 8192) {
    return InvalidArgumentError(source + ": clip_frames, frame_stride and size must be positive");
  }
  info->sample_shape = {3, frames, size, size};
  info->video.clip.frames = static_cast<int>(frames);
  info->video.clip.stride = static_cast<int>(stride);
  info->video.transform.size = static_cast<int>(size);
  info->video.ingest = IngestSettingsOf(dataset, info->video.clip, static_cast<int>(size));
  return Status::Ok();
}

// The evaluation report's class names when it has them, else "0", "1", ...
std::vector<std::string> ClassNames(const nlohmann::json& metrics, int64_t num_classes) {
  std::vector<std::string> names;
  const auto it = metrics.find("class_names");
  if (it != metrics.end() && it->is_array() && static_cast<int64_t>(it->size()) == num_classes) {
    for (const auto& name : *it) names.push_back(name.is_string() ? name.get<std::string>() : "");
  }
  if (names.empty()) {
    for (int64_t i = 0; i < num_classes; ++i) names.push_back(std::to_string(i));
  }
  return names;
}

}  // namespace

torch::Tensor InputTensor(const float* input, int64_t n, const std::vector<int64_t>& shape) {
  std::vector<int64_t> sizes = {n};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  // from_blob does not copy and never writes: the const_cast only satisfies its signature.
  return torch::from_blob(const_cast<float*>(input), sizes, torch::kFloat32);
}

std::vector<float> FloatsOf(const torch::Tensor& t) {
  const torch::Tensor f = t.to(torch::kFloat32).contiguous();
  std::vector<float> values(static_cast<size_t>(f.numel()));
  std::memcpy(values.data(), f.data_ptr<float>(), values.size() * sizeof(float));
  return values;
}

Result<std::vector<float>> LogitsOf(const torch::Tensor& output, int64_t n) {
  if (output.dim() != 2 || output.size(0) != n) {
    return InternalError("the model returned a tensor of shape " + c10::str(output.sizes()) +
                         ", not [" + std::to_string(n) + ", classes]");
  }
  return FloatsOf(output);
}

namespace {

class ModuleModel : public Model {
 public:
  ModuleModel(ModelInfo info, torch::nn::AnyModule module, bool bf16)
      : module_(std::move(module)), bf16_(bf16) {
    info_ = std::move(info);
  }
  Result<Embeddings> Embed(const float* input, int64_t n, const std::string& layer) const override {
    auto resnet = std::dynamic_pointer_cast<models::VideoResNetImpl>(module_.ptr());
    if (!resnet) return Model::Embed(input, n, layer);
    REEL_ASSIGN_OR_RETURN(int stage, models::StageOfLayer(layer));
    if (stage > resnet->options().head_stage) {
      return InvalidArgumentError(info_.source + " has no " + layer +
                                  ": its classifier sits on layer" +
                                  std::to_string(resnet->options().head_stage));
    }
    Embeddings out;
    auto values = Guarded(bf16_, [&] {
      torch::Tensor x = InputTensor(input, n, info_.sample_shape);
      torch::Tensor f = resnet->features(x, stage);
      out.width = f.size(1);
      return Result<std::vector<float>>(FloatsOf(f));
    });
    if (!values.ok()) return values.status();
    out.values = std::move(*values);
    return out;
  }
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    return Guarded(bf16_, [&] {
      torch::Tensor x = InputTensor(input, n, info_.sample_shape);
      // AnyModule::forward is not const, but an eval-mode forward changes no state.
      return LogitsOf(const_cast<torch::nn::AnyModule&>(module_).forward(x), n);
    });
  }

 private:
  torch::nn::AnyModule module_;
  bool bf16_;
};

class ScriptModel : public Model {
 public:
  // Shares the graph.
  ScriptModel(const torch::jit::Module& module, bool bf16) : module_(module), bf16_(bf16) {}
  void set_info(ModelInfo info) { info_ = std::move(info); }
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    return Guarded(bf16_, [&] {
      std::vector<torch::jit::IValue> args = {InputTensor(input, n, info_.sample_shape)};
      torch::jit::IValue out = const_cast<torch::jit::Module&>(module_).forward(args);
      if (!out.isTensor())
        return Result<std::vector<float>>(
            InternalError("the TorchScript model did not return a tensor"));
      return LogitsOf(out.toTensor(), n);
    });
  }

 private:
  torch::jit::Module module_;
  bool bf16_;
};

}  // namespace

Result<int64_t> WarmUp(const Model& model, int64_t sample_size) {
  std::vector<float> zeros(static_cast<size_t>(sample_size), 0.f);
  REEL_ASSIGN_OR_RETURN(std::vector<float> logits, model.Forward(zeros.data(), 1));
  if (logits.empty()) return InternalError("the model returned no classes");
  return static_cast<int64_t>(logits.size());
}

Result<ReelModule> BuildReelModule(const Parts& parts) {
  REEL_ASSIGN_OR_RETURN(models::ModelSpec spec,
                        train::SpecFromArchitecture(parts.architecture, parts.source));
  ReelModule built;
  REEL_ASSIGN_OR_RETURN(built.module, models::BuildModel(spec));
  Status loaded = models::LoadStateDict(*built.module.ptr(), parts.weights);
  if (!loaded.ok()) {
    return FailedPreconditionError(parts.source + " does not fit model '" + spec.name +
                                   "': " + loaded.message());
  }
  built.module.ptr()->eval();
  built.info.name = parts.name;
  built.info.version = parts.version;
  built.info.source = parts.source;
  built.info.platform = "reel_libtorch";
  built.info.architecture = spec.name;
  REEL_RETURN_IF_ERROR(ApplyDataConfig(parts.config, parts.source, &built.info));
  built.info.class_names = ClassNames(parts.metrics, spec.num_classes);
  return built;
}

Status CheckClasses(const Model& model) {
  REEL_ASSIGN_OR_RETURN(const int64_t classes, WarmUp(model, model.info().sample_size()));
  if (classes != model.info().num_classes()) {
    return InternalError(model.info().source + ": the model gave " + std::to_string(classes) +
                         " scores, its architecture says " +
                         std::to_string(model.info().num_classes()));
  }
  return Status::Ok();
}

namespace {

Result<std::unique_ptr<Model>> LoadReelModel(const Parts& parts, Precision precision) {
  REEL_ASSIGN_OR_RETURN(ReelModule built, BuildReelModule(parts));
  auto model = std::make_unique<ModuleModel>(std::move(built.info), std::move(built.module),
                                             precision == Precision::kBf16);
  REEL_RETURN_IF_ERROR(CheckClasses(*model));
  return std::unique_ptr<Model>(std::move(model));
}

// The largest difference between two models' logits for one fixed pseudo-random clip, and the
// largest logit; nullopt when either forward fails.
std::optional<std::pair<double, double>> LogitGap(const Model& a, const Model& b,
                                                  int64_t sample_size) {
  std::vector<float> clip(static_cast<size_t>(sample_size));
  for (size_t i = 0; i < clip.size(); ++i) clip[i] = static_cast<float>(std::sin(0.37 * i));
  Result<std::vector<float>> la = a.Forward(clip.data(), 1), lb = b.Forward(clip.data(), 1);
  if (!la.ok() || !lb.ok() || la->size() != lb->size()) return std::nullopt;
  double gap = 0, largest = 0;
  for (size_t i = 0; i < la->size(); ++i) {
    gap = std::max(gap, static_cast<double>(std::fabs((*la)[i] - (*lb)[i])));
    largest = std::max(largest, static_cast<double>(std::fabs((*la)[i])));
  }
  return std::make_pair(gap, largest);
}

// The module frozen (parameters and attributes become constants; batch norm folds into the
// convolution before it) and optimized for inference (weights prepacked for oneDNN, tensors kept
// in its layout between operators), as torch.jit.optimize_for_inference does: torchvision's
// R(2+1)D-18 as TorchScript, batch 1, 2 threads, took 125 ms a clip instead of 233-402 ms here.
// Kept only if its logits for a fixed clip match the module's as saved (1e-4 of the largest); a
// module that cannot be frozen (one whose forward changes its attributes) is served as saved,
// with the reason in the log. Not under bf16: autocast does not reach the oneDNN graph.
std::unique_ptr<ScriptModel> OptimizedForInference(const torch::jit::Module& module,
                                                   const ScriptModel& as_saved) {
  const std::string& path = as_saved.info().source;
  std::unique_ptr<ScriptModel> fast;
  try {
    torch::jit::Module frozen = torch::jit::freeze(module);
    fast = std::make_unique<ScriptModel>(torch::jit::optimize_for_inference(frozen), false);
  } catch (const c10::Error& e) {
    Logger("serve")->info("{}: served as saved, not optimized for inference: {}", path,
                          e.what_without_backtrace());
    return nullptr;
  }
  ModelInfo info = as_saved.info();
  info.optimization = "frozen, optimized for inference";
  fast->set_info(info);
  const auto gap = LogitGap(as_saved, *fast, info.sample_size());
  if (!gap || gap->first > 1e-4 * std::max(1e-3, gap->second)) {
    Logger("serve")->warn("{}: served as saved: optimized for inference it answered differently",
                          path);
    return nullptr;
  }
  return fast;
}

Result<std::unique_ptr<Model>> LoadTorchScript(const std::string& path,
                                               const LoadOptions& options) {
  if (!fs::exists(path)) return NotFoundError("no such TorchScript file: '" + path + "'");
  std::string config;
  if (!options.config.empty()) {
    REEL_ASSIGN_OR_RETURN(config, ReadFileToString(options.config, "model config"));
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, torch::kCPU);
    module.eval();
  } catch (const c10::Error& e) {
    return InvalidArgumentError("'" + path +
                                "' is not a TorchScript file: " + e.what_without_backtrace());
  }
  const bool bf16 = options.precision == Precision::kBf16;
  auto model = std::make_unique<ScriptModel>(module, bf16);
  ModelInfo info;
  info.name = StemOf(path);
  info.version = "1";
  info.source = path;
  info.platform = "pytorch_torchscript";
  info.architecture = "torchscript";
  REEL_RETURN_IF_ERROR(ApplyDataConfig(config, path, &info));
  model->set_info(info);
  REEL_ASSIGN_OR_RETURN(const int64_t classes, WarmUp(*model, info.sample_size()));
  info.class_names = ClassNames(nlohmann::json::object(), classes);
  model->set_info(std::move(info));
  if (!bf16) {
    if (auto fast = OptimizedForInference(module, *model)) {
      Logger("serve")->info("{}: frozen and optimized for inference (oneDNN)", path);
      model = std::move(fast);
    }
  }
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace

bool IsTorchScriptPath(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".pt" || ext == ".pth" || ext == ".ts" || ext == ".torchscript";
}

Result<Parts> ReadParts(const std::string& source, const LoadOptions& options) {
  if (registry::IsModelUri(source)) return PartsFromRegistry(source, options);
  return PartsFromPath(source, options);
}

}  // namespace internal

Result<std::unique_ptr<Model>> LoadModel(const std::string& source, const LoadOptions& options) {
  try {
    if (options.stages != 1) return internal::LoadStagedModel(source, options);
    if (internal::IsTorchScriptPath(source)) return internal::LoadTorchScript(source, options);
    REEL_ASSIGN_OR_RETURN(internal::Parts parts, internal::ReadParts(source, options));
    return internal::LoadReelModel(parts, options.precision);
  } catch (const c10::Error& e) {
    return InternalError(source + ": LibTorch: " + e.what_without_backtrace());
  }
}

void SetComputeThreads(int threads) { torch::set_num_threads(threads); }

Result<Precision> ParsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "auto") return train::CpuHasNativeBf16() ? Precision::kBf16 : Precision::kFp32;
  return InvalidArgumentError("precision '" + name + "': expected fp32, bf16 or auto");
}

const char* PrecisionName(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

}  // namespace reel::serve
