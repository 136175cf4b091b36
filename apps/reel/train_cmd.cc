// reel train --config train.yaml [--resume] [--set key=value ...]
// reel eval  --config train.yaml [--checkpoint URI] [--step N] [--split NAME] [--clips N]
// One process trains a video classifier from a validated YAML config (src/train/train_config.h)
// and evaluates checkpoints. Metrics go to <run_dir>/metrics.jsonl; the final report to stdout.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "apps/reel/commands.h"
#include "train/trainer.h"

namespace reel::cli {
namespace {

struct TrainFlags {
  std::string config;
  std::vector<std::string> overrides;
  bool resume = false;
  int64_t stop_after = 0;
  bool quiet = false;
  bool json = false;
};

struct EvalFlags {
  std::string config;
  std::vector<std::string> overrides;
  std::string checkpoint;
  int64_t step = -1;
  std::string split;
  int clips = 0;
  bool json = false;
};

Result<train::TrainConfig> LoadConfig(const std::string& path, const std::vector<std::string>& overrides) {
  if (overrides.empty()) return train::LoadTrainConfig(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("training config '" + path + "' cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REEL_ASSIGN_OR_RETURN(std::string merged, train::ApplyConfigOverrides(text, overrides));
  return train::ParseTrainConfigText(merged, path + " (with --set)");
}

void PrintReport(const train::EvalReport& r, bool json) {
  if (json) {
    std::printf("%s\n", r.ToJson().c_str());
    return;
  }
  std::printf("clips %lld  top-1 %.4f  top-5 %.4f  videos %lld  video top-1 %.4f\n",
              static_cast<long long>(r.clips), r.top1, r.top5, static_cast<long long>(r.videos), r.video_top1);
  for (size_t c = 0; c < r.per_class.size(); ++c) {
    std::string name = c < r.class_names.size() ? r.class_names[c] : "class " + std::to_string(c);
    std::printf("  %-24s %.4f (%lld clips)\n", name.c_str(), r.per_class[c],
                static_cast<long long>(r.per_class_count[c]));
  }
}

int RunTrainCommand(const TrainFlags& flags) {
  auto config = LoadConfig(flags.config, flags.overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "reel train: %s\n", config.status().message().c_str());
    return ExitCodeFor(config.status());
  }
  train::TrainOptions options;
  options.resume = flags.resume;
  options.stop_after_steps = flags.stop_after;
  options.progress = !flags.quiet;
  auto result = train::RunTraining(*config, options);
  if (!result.ok()) {
    std::fprintf(stderr, "reel train: %s\n", result.status().ToString().c_str());
    return ExitCodeFor(result.status());
  }
  if (flags.json) {
    std::printf("{\"steps\": %lld, \"samples\": %lld, \"seconds\": %.3f, \"finished\": %s, \"resumed_from\": %lld%s%s}\n",
                static_cast<long long>(result->steps), static_cast<long long>(result->samples), result->seconds,
                result->finished ? "true" : "false", static_cast<long long>(result->resumed_from),
                result->eval ? ", \"eval\": " : "", result->eval ? result->eval->ToJson().c_str() : "");
    return 0;
  }
  std::printf("trained %lld steps (%lld samples) in %.1f s%s; metrics in %s/metrics.jsonl, checkpoints in %s\n",
              static_cast<long long>(result->steps), static_cast<long long>(result->samples), result->seconds,
              result->resumed_from >= 0 ? (", resumed from step " + std::to_string(result->resumed_from)).c_str() : "",
              config->run_dir.c_str(), config->checkpoint_uri.c_str());
  if (result->eval) {
    std::printf("validation (%s): ", config->data.val_split.c_str());
    PrintReport(*result->eval, false);
  } else {
    std::printf("stopped before the end; continue with --resume\n");
  }
  return 0;
}

int RunEvalCommand(const EvalFlags& flags) {
  auto config = LoadConfig(flags.config, flags.overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "reel eval: %s\n", config.status().message().c_str());
    return ExitCodeFor(config.status());
  }
  train::EvalOptions options;
  options.checkpoint_uri = flags.checkpoint;
  if (flags.step >= 0) options.step = flags.step;
  options.split = flags.split;
  options.eval_clips = flags.clips;
  auto report = train::RunEvaluation(*config, options);
  if (!report.ok()) {
    std::fprintf(stderr, "reel eval: %s\n", report.status().ToString().c_str());
    return ExitCodeFor(report.status());
  }
  PrintReport(*report, flags.json);
  return 0;
}

}  // namespace

void RegisterTrain(CLI::App& app, int* exit_code) {
  static TrainFlags train_flags;
  CLI::App* train = app.add_subcommand("train", "train a video classifier from a YAML config");
  train->add_option("--config", train_flags.config, "training config (YAML)")->required();
  train->add_option("--set", train_flags.overrides, "override a config key, e.g. --set train.max_steps=20")
      ->take_all();
  train->add_flag("--resume", train_flags.resume, "continue from the latest checkpoint");
  train->add_option("--stop-after", train_flags.stop_after, "stop after this many steps (resumable)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  train->add_flag("--quiet", train_flags.quiet, "no progress bar");
  train->add_flag("--json", train_flags.json, "print the result as JSON");
  train->callback([exit_code] { *exit_code = RunTrainCommand(train_flags); });

  static EvalFlags eval_flags;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a checkpoint: top-1/5, per class, video level");
  eval->add_option("--config", eval_flags.config, "training config (YAML) of the run")->required();
  eval->add_option("--set", eval_flags.overrides, "override a config key")->take_all();
  eval->add_option("--checkpoint", eval_flags.checkpoint, "checkpoint URI (default: the config's)");
  eval->add_option("--step", eval_flags.step, "checkpoint step (default: the latest)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  eval->add_option("--split", eval_flags.split, "split to evaluate (default: data.val_split)");
  eval->add_option("--clips", eval_flags.clips, "clips per video (default: data.eval_clips)")
      ->check(CLI::Range(1, 64));
  eval->add_flag("--json", eval_flags.json, "print the report as JSON");
  eval->callback([exit_code] { *exit_code = RunEvalCommand(eval_flags); });
}

}  // namespace reel::cli
