// reel features — one embedding per clip of a dataset, from a model's layer, as a features
// dataset that `reel train` fits a head on (`model: {name: head}`; serve/features.h).
//
//   reel features MODEL DATASET OUT [--layer avgpool|layer1..layer4] [--split NAME]...
//                 [--batch N] [--workers N] [--threads N] [--shard-mib M] [--registry URI]
//                 [--config F]
//
// MODEL as `reel serve` takes it (a Reel video ResNet: a registry version, a run, a checkpoint,
// a .safetensors file with --config). Prints the model, then a line per split and a summary on
// stdout; exit codes as every `reel` command (6 when OUT already holds a dataset).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "apps/reel/commands.h"
#include "apps/reel/torch_commands.h"
#include "models/cpu_allocator.h"
#include "serve/features.h"
#include "serve/model.h"

namespace reel::cli {
namespace {

constexpr std::string_view kFeaturesCommand = "reel features";

struct FeaturesFlags {
  std::string model;
  std::string registry;
  int threads = 0;  // LibTorch threads; 0: one per core
  serve::FeatureOptions options;
};

int RunFeaturesCommand(const FeaturesFlags& f) {
  if (Status s = f.options.Validate(); !s.ok()) return Fail(kFeaturesCommand, s);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  models::UseCachingCpuAllocator();
  serve::SetComputeThreads(f.threads > 0 ? f.threads : cores);
  serve::LoadOptions load;
  load.registry = f.registry;
  load.config = f.options.model_config;
  Result<std::unique_ptr<serve::Model>> model = serve::LoadModel(f.model, load);
  if (!model.ok()) return Fail(kFeaturesCommand, model.status());
  const serve::ModelInfo& info = (*model)->info();
  std::printf("model %s version %s: %s from %s, features of %s\n", info.name.c_str(),
              info.version.c_str(), info.architecture.c_str(), info.source.c_str(),
              f.options.layer.c_str());
  Result<serve::FeatureSummary> summary = serve::ExtractFeatures(f.options, **model);
  if (!summary.ok()) return Fail(kFeaturesCommand, summary.status());
  for (const auto& [split, records] : summary->splits) {
    std::printf("  %-10s %lld embeddings\n", split.c_str(), static_cast<long long>(records));
  }
  std::printf("wrote %lld embeddings of %lld values to %s\n",
              static_cast<long long>(summary->records), static_cast<long long>(summary->dim),
              summary->output.c_str());
  return 0;
}

}  // namespace

void RegisterFeatures(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<FeaturesFlags>();
  serve::FeatureOptions& o = f->options;
  CLI::App* cmd = app.add_subcommand("features", TorchCommandNamed("features").description);
  cmd->add_option("model", f->model, "models:/name@alias, a run, a checkpoint, a .safetensors")
      ->required();
  cmd->add_option("dataset", o.dataset, "the dataset whose clips to embed")->required();
  cmd->add_option("out", o.output, "where the features dataset goes (folder or s3:// prefix)")
      ->required();
  cmd->add_option("--layer", o.layer,
                  "avgpool (what the classifier reads, the default) or layer1..layer4");
  cmd->add_option("--split", o.splits, "a split to embed (repeatable; default: every split)");
  cmd->add_option("--batch", o.batch, "clips per forward pass (default 8)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--workers", o.workers, "decode threads (default 2)")->check(CLI::Range(1, 256));
  cmd->add_option("--threads", f->threads, "LibTorch threads (default: one per core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--shard-mib", o.shard_mib, "output shard size in MiB (default 128)");
  cmd->add_option("--registry", f->registry,
                  "registry for models:/ URIs (default $REEL_REGISTRY_URI, else "
                  "./reel-data/registry)");
  cmd->add_option("--config", o.model_config,
                  "YAML with model and data sections, for a .safetensors file");
  cmd->callback([f, exit_code] { *exit_code = RunFeaturesCommand(*f); });
}

}  // namespace reel::cli
