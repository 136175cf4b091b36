// reel predict — offline inference: every video of a folder, an S3 prefix, a CSV/JSONL list or
// an ingested dataset classified by one model, as JSON lines on any store (serve/predict.h).
//
//   reel predict MODEL INPUT OUT [--top-k K] [--clips N] [--timeline] [--workers N]
//                [--instances N] [--threads N] [--max-batch N] [--part-size N]
//                [--registry URI] [--config F]
//
// MODEL: models:/name@alias or models:/name/4, a run folder, a checkpoint, a .safetensors file
// (with --config) or a TorchScript file, as `reel serve` takes it. OUT gets part-NNNNN.jsonl and
// progress.json; run again after an interruption (kill -9 included), it predicts only what is
// missing. Videos that cannot be read or decoded are lines with "error", not failures. Prints
// the model and a summary line on stdout; exit codes as every `reel` command.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "apps/reel/commands.h"
#include "apps/reel/torch_commands.h"
#include "models/cpu_allocator.h"
#include "serve/model.h"
#include "serve/predict.h"

namespace reel::cli {
namespace {

constexpr std::string_view kPredictCommand = "reel predict";

struct PredictFlags {
  std::string model;
  std::string registry;
  std::string config;
  int threads = 0;  // LibTorch threads per forward pass; 0: cores / instances
  serve::PredictOptions options;
};

int RunPredictCommand(const PredictFlags& f) {
  if (Status s = f.options.Validate(); !s.ok()) return Fail(kPredictCommand, s);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  models::UseCachingCpuAllocator();
  serve::SetComputeThreads(f.threads > 0 ? f.threads : std::max(1, cores / f.options.instances));
  serve::LoadOptions load;
  load.registry = f.registry;
  load.config = f.config;
  Result<std::unique_ptr<serve::Model>> model = serve::LoadModel(f.model, load);
  if (!model.ok()) return Fail(kPredictCommand, model.status());
  const serve::ModelInfo& info = (*model)->info();
  std::printf("model %s version %s: %s (%lld classes) from %s\n", info.name.c_str(),
              info.version.c_str(), info.architecture.c_str(),
              static_cast<long long>(info.num_classes()), info.source.c_str());
  Result<serve::PredictSummary> summary = serve::Predict(f.options, **model);
  if (!summary.ok()) return Fail(kPredictCommand, summary.status());
  std::printf(
      "predicted %lld of %lld videos (%lld could not be decoded; %lld finished earlier) into %s, "
      "%lld parts\n",
      static_cast<long long>(summary->predicted), static_cast<long long>(summary->listed),
      static_cast<long long>(summary->failed), static_cast<long long>(summary->earlier),
      summary->output.c_str(), static_cast<long long>(summary->parts));
  return 0;
}

}  // namespace

void RegisterPredict(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<PredictFlags>();
  serve::PredictOptions& o = f->options;
  CLI::App* cmd = app.add_subcommand("predict", TorchCommandNamed("predict").description);
  cmd->add_option("model", f->model,
                  "models:/name@alias, a run, a checkpoint, a .safetensors or TorchScript file")
      ->required();
  cmd->add_option("input", o.input,
                  "a folder or s3:// prefix of videos, one video, a .csv/.jsonl list, a dataset")
      ->required();
  cmd->add_option("out", o.output, "folder or s3:// prefix for part-NNNNN.jsonl and progress.json")
      ->required();
  cmd->add_option("--top-k", o.top_k, "classes per video, best first (default 5)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--clips", o.clips, "clips per video (default: the model's setting)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--timeline", o.timeline, "each clip's time span, best class and score");
  cmd->add_option("--workers", o.workers, "videos decoded at once (default: one per core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--instances", o.instances, "forward passes at once (default 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--threads", f->threads,
                  "LibTorch threads per forward (default: cores / "
                  "instances)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max-batch", o.max_batch, "clips per forward pass (default 8)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--part-size", o.part_size, "lines per output part (default 1000)")
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--registry", f->registry,
                  "registry for models:/ URIs (default $REEL_REGISTRY_URI, else "
                  "./reel-data/registry)");
  cmd->add_option("--config", f->config,
                  "YAML with model and data sections, for a .safetensors or TorchScript file");
  cmd->callback([f, exit_code] { *exit_code = RunPredictCommand(*f); });
}

}  // namespace reel::cli
