// A model the server can run, as the server sees it: no LibTorch here (model_torch.cc has it).
//
// A model maps n samples of sample_shape ([C, T, H, W] FP32, normalised as in evaluation) to
// n × num_classes logits. LoadModel reads one from
//   models:/name@alias, models:/name/4   a registry version (options.registry, else
//                                        $REEL_REGISTRY_URI, else ./reel-data/registry)
//   a run folder, a checkpoint store or  what `reel models register` reads (train/registration.h);
//   one checkpoint, a .safetensors file  a .safetensors file needs options.config (YAML with a
//                                        `model:` section)
//   a .pt / .pth / .ts file              TorchScript from torch.jit.save; options.config (or
//                                        the defaults 3×8×112×112) gives the input shape
// With options.stages = 2, a Reel model is split across this process and a stage process
// (serve/stages.h).
// and warms it up with one forward pass, which also tells the class count of TorchScript.
//
// Errors: InvalidArgument for a source that is none of these; NotFound for a missing file or
// version; FailedPrecondition when the weights do not fit the architecture; Internal for a
// LibTorch failure (its message kept).
// Thread-safety: Forward may be called from several threads at once (one per model instance).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "serve/video.h"

namespace reel::serve {

struct ModelInfo {
  std::string name;          // the registered model's name, or the file's stem
  std::string version;       // the registry version ("4"), or "1" for a file
  std::string source;        // what it was loaded from, resolved ("models:/synthetic/4")
  std::string platform;      // "reel_libtorch" (Reel's architectures) or "pytorch_torchscript"
  std::string architecture;  // "r2plus1d", or "torchscript"
  std::vector<int64_t> sample_shape;     // [C, T, H, W]
  std::vector<std::string> class_names;  // num_classes of them ("0", "1", ... when unknown)
  VideoSettings video;                   // how an encoded video becomes samples (BYTES inputs)
  std::string placement;  // model parallel (LoadOptions::stages): which units run where
  // TorchScript: "frozen, optimized for inference" when served so; empty when served as saved.
  std::string optimization;

  int64_t sample_size() const {  // C × T × H × W
    int64_t n = 1;
    for (int64_t d : sample_shape) n *= d;
    return n;
  }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
};

struct Embeddings {
  int64_t width = 0;          // values per sample
  std::vector<float> values;  // n × width
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  // `input`: n samples, one after the other. Returns n × num_classes logits.
  virtual Result<std::vector<float>> Forward(const float* input, int64_t n) const = 0;
  // The output of `layer` for n samples, averaged over time and space: "avgpool" is what the
  // classifier reads, "layer1".."layer4" a stage's output (models/video_resnet.h). InvalidArgument
  // for a layer the model lacks; Unimplemented for models without named stages (TorchScript,
  // the frame CNNs).
  virtual Result<Embeddings> Embed(const float* /*input*/, int64_t /*n*/,
                                   const std::string& /*layer*/) const {
    return UnimplementedError(info_.source + " (" + info_.architecture +
                              ") has no named layers to take features from; features come from "
                              "Reel's video ResNets (r3d, mc3, r2plus1d and their _18 forms)");
  }

 protected:
  ModelInfo info_;
};

// The arithmetic of a model's forward passes: fp32, or bf16 autocast (convolutions and matrix
// products in bf16, reductions and the rest in fp32, as training's `amp: bf16`): about 2.6x
// faster on a CPU with bf16 units, with scores that differ from fp32's in the third digit.
enum class Precision { kFp32, kBf16 };
// "fp32", "bf16", or "auto": bf16 where the CPU has bf16 units, else fp32. InvalidArgument
// otherwise.
Result<Precision> ParsePrecision(const std::string& name);
const char* PrecisionName(Precision precision);

struct LoadOptions {
  std::string registry;  // for models:/ URIs; "" = $REEL_REGISTRY_URI, else the default folder
  std::string config;    // YAML: the model and data sections (a .safetensors file, TorchScript)
  Precision precision = Precision::kFp32;
  // Model parallel (serve/stages.h): 2 splits a Reel video ResNet between this process and a
  // stage process holding the second half's weights. Only 1 and 2 are supported.
  int stages = 1;
  // stages 2: the address ("host:port") of a running stage server (stages.h) instead of
  // starting one, and the command that starts one (default: this program's `serve-stage`).
  std::string stage_address;
  std::vector<std::string> stage_command;
};

Result<std::unique_ptr<Model>> LoadModel(const std::string& source, const LoadOptions& options);

// LibTorch's intra-op threads for every forward pass in this process (at::set_num_threads).
void SetComputeThreads(int threads);

}  // namespace reel::serve
