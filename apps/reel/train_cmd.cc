// reel train --config train.yaml [--resume] [--set key=value ...]
//            [--nproc N [--nnodes M --node-rank K --master-addr HOST --master-port P]
//            [--max-restarts R]]
// reel eval  --config train.yaml [--checkpoint URI | --model URI] [--step N] [--split NAME]
//            [--clips N]
// One process trains a video classifier from a validated YAML config (src/train/train_config.h)
// and evaluates checkpoints. Metrics go to <run_dir>/metrics.jsonl; the final report to stdout.
// With --nproc/--nnodes, this process becomes the elastic launcher (parallel/launcher.h) of N
// worker processes (and parallel.parameter_servers server processes), each `reel train` again with
// the launcher's variables; under torchrun, srun or Kubeflow (RANK/WORLD_SIZE or SLURM_PROCID set)
// it is one worker of their job.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "apps/reel/commands.h"
#include "apps/reel/torch_commands.h"
#include "base/files.h"
#include "base/stop_request.h"
#include "base/subprocess.h"
#include "parallel/launcher.h"
#include "parallel/world.h"
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
  // Launcher.
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int max_restarts = 0;
  std::string iface;
};

struct EvalFlags {
  std::string config;
  std::vector<std::string> overrides;
  std::string checkpoint;
  std::string model;  // --model: a registered version or .safetensors file instead
  int64_t step = -1;
  std::string split;
  int clips = 0;
  bool json = false;
  std::string out;  // --out: the report as JSON, besides what is printed
};

Result<train::TrainConfig> LoadConfig(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  if (overrides.empty()) return train::LoadTrainConfig(path);
  REEL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "training config"));
  REEL_ASSIGN_OR_RETURN(std::string merged, train::ApplyConfigOverrides(text, overrides));
  return train::ParseTrainConfigText(merged, path + " (with --set)");
}

std::string ClassName(const train::EvalReport& r, size_t c) {
  return c < r.class_names.size() ? r.class_names[c] : "class " + std::to_string(c);
}

// The clip-level confusion matrix, rows the true class and columns the predicted one (numbered
// as the rows); too wide to read past 20 classes, where --json and --out still hold it.
void PrintConfusion(const train::EvalReport& r) {
  const size_t n = r.confusion.size();
  if (n == 0 || n > 20) return;
  std::printf("confusion (clips; rows: true class, columns: predicted class)\n");
  std::printf("  %-27s", "");
  for (size_t c = 0; c < n; ++c) std::printf(" %5zu", c);
  std::printf("\n");
  for (size_t t = 0; t < n; ++t) {
    std::printf("  %2zu %-24s", t, ClassName(r, t).c_str());
    for (size_t p = 0; p < n && p < r.confusion[t].size(); ++p) {
      std::printf(" %5lld", static_cast<long long>(r.confusion[t][p]));
    }
    std::printf("\n");
  }
}

void PrintReport(const train::EvalReport& r, bool json) {
  if (json) {
    std::printf("%s\n", r.ToJson().c_str());
    return;
  }
  std::printf("clips %lld  top-1 %.4f  top-5 %.4f  videos %lld  video top-1 %.4f\n",
              static_cast<long long>(r.clips), r.top1, r.top5, static_cast<long long>(r.videos),
              r.video_top1);
  for (size_t c = 0; c < r.per_class.size(); ++c) {
    std::printf("  %-24s %.4f (%lld clips)\n", ClassName(r, c).c_str(), r.per_class[c],
                static_cast<long long>(r.per_class_count[c]));
  }
  PrintConfusion(r);
}

// Runs this command again as N workers under the elastic launcher.
int RunLauncherCommand(const TrainFlags& flags) {
  Result<std::string> self = ThisProgram();
  if (!self.ok()) return Fail("reel train", self.status());
  parallel::LaunchOptions o;
  o.nproc = flags.nproc;
  o.nnodes = flags.nnodes;
  o.node_rank = flags.node_rank;
  o.master_addr = flags.master_addr;
  o.master_port = flags.master_port;
  o.max_restarts = flags.max_restarts;
  // Parameter servers: --nproc counts workers; the servers are more ranks, each restarted alone.
  auto config = LoadConfig(flags.config, flags.overrides);
  if (!config.ok()) return Fail("reel train", config.status());
  if (config->parallel.parameter_servers > 0) {
    o.nproc += config->parallel.parameter_servers;
    o.restart_alone = true;
  }
  o.worker_argv = {*self, "train", "--config", flags.config};
  for (const auto& s : flags.overrides) o.worker_argv.insert(o.worker_argv.end(), {"--set", s});
  if (!flags.iface.empty())
    o.worker_argv.insert(o.worker_argv.end(), {"--set", "dist.iface=" + flags.iface});
  if (flags.resume) o.worker_argv.emplace_back("--resume");
  if (flags.stop_after > 0)
    o.worker_argv.insert(o.worker_argv.end(), {"--stop-after", std::to_string(flags.stop_after)});
  if (flags.quiet) o.worker_argv.emplace_back("--quiet");
  if (flags.json) o.worker_argv.emplace_back("--json");
  if (!flags.resume) o.restart_args = {"--resume"};
  auto result = parallel::RunLauncher(o);
  if (!result.ok()) return Fail("reel train", result.status());
  if (result->exit_code == kExitPreempted) {
    std::fprintf(stderr, "reel train: %s; --resume continues from the checkpoint\n",
                 result->failure.c_str());
  } else if (result->exit_code != 0) {
    std::fprintf(stderr, "reel train: the job failed after %d restart%s: %s\n", result->restarts,
                 result->restarts == 1 ? "" : "s", result->failure.c_str());
  } else if (result->restarts > 0) {
    std::fprintf(stderr, "reel train: the job finished after %d restart%s (the last failure: %s)\n",
                 result->restarts, result->restarts == 1 ? "" : "s", result->failure.c_str());
  }
  return result->exit_code;
}

int RunTrainCommand(const TrainFlags& flags) {
  if (flags.nproc > 1 || flags.nnodes > 1 || flags.max_restarts > 0)
    return RunLauncherCommand(flags);
  auto world = parallel::WorldFromEnvironment();
  if (!world.ok()) {
    std::fprintf(stderr, "reel train: %s\n", world.status().message().c_str());
    return ExitCodeFor(world.status());
  }
  std::vector<std::string> overrides = flags.overrides;
  if (!flags.iface.empty()) overrides.push_back("dist.iface=" + flags.iface);
  auto config = LoadConfig(flags.config, overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "reel train: %s\n", config.status().message().c_str());
    return ExitCodeFor(config.status());
  }
  // A parameter-server job started as one process launches its worker and servers.
  if (!world->distributed() && config->parallel.parameter_servers > 0) {
    return RunLauncherCommand(flags);
  }
  // SIGTERM (a scheduler's preemption; the launcher passes its own on) ends training at the next
  // step with a checkpoint and exit code kExitPreempted.
  InstallStopRequestHandler();
  train::TrainOptions options;
  options.resume = flags.resume;
  options.stop_after_steps = flags.stop_after;
  options.should_stop = StopRequested;
  options.progress = !flags.quiet;
  options.world = *world;
  auto result = train::RunTraining(*config, options);
  if (!result.ok()) {
    std::fprintf(
        stderr, "reel train%s: %s\n",
        world->distributed() ? (" (rank " + std::to_string(world->rank) + ")").c_str() : "",
        result.status().ToString().c_str());
    return ExitCodeFor(result.status());
  }
  if (result->preempted) {
    if (world->rank == 0) {
      std::fprintf(stderr,
                   "reel train: preempted (SIGTERM) after step %lld; checkpoint written in %s; "
                   "--resume continues\n",
                   static_cast<long long>(result->steps), config->checkpoint_uri.c_str());
    }
    return kExitPreempted;
  }
  if (world->rank != 0) return 0;  // rank 0 reports for the job
  if (flags.json) {
    std::printf(
        "{\"steps\": %lld, \"samples\": %lld, \"seconds\": %.3f, \"finished\": %s, "
        "\"resumed_from\": %lld, \"registered\": \"%s\"%s%s}\n",
        static_cast<long long>(result->steps), static_cast<long long>(result->samples),
        result->seconds, result->finished ? "true" : "false",
        static_cast<long long>(result->resumed_from), result->registered.c_str(),
        result->eval ? ", \"eval\": " : "", result->eval ? result->eval->ToJson().c_str() : "");
    return 0;
  }
  std::printf(
      "trained %lld steps (%lld samples) in %.1f s%s; metrics in %s/metrics.jsonl, checkpoints in "
      "%s\n",
      static_cast<long long>(result->steps), static_cast<long long>(result->samples),
      result->seconds,
      result->resumed_from >= 0
          ? (", resumed from step " + std::to_string(result->resumed_from)).c_str()
          : "",
      config->run_dir.c_str(), config->checkpoint_uri.c_str());
  if (result->eval) {
    std::printf("validation (%s): ", config->data.val_split.c_str());
    PrintReport(*result->eval, false);
    if (!result->registered.empty()) std::printf("registered %s\n", result->registered.c_str());
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
  options.weights = flags.model;
  options.checkpoint_uri = flags.checkpoint;
  if (flags.step >= 0) options.step = flags.step;
  options.split = flags.split;
  options.eval_clips = flags.clips;
  auto report = train::RunEvaluation(*config, options);
  if (!report.ok()) return Fail("reel eval", report.status());
  PrintReport(*report, flags.json);
  if (!flags.out.empty()) {
    std::ofstream out(flags.out, std::ios::trunc);
    out << report->ToJson() << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "reel eval: cannot write the report to %s\n", flags.out.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

void RegisterTrain(CLI::App& app, int* exit_code) {
  static TrainFlags train_flags;
  CLI::App* train = app.add_subcommand("train", TorchCommandNamed("train").description);
  train->add_option("--config", train_flags.config, "training config (YAML)")->required();
  train
      ->add_option("--set", train_flags.overrides,
                   "override a config key, e.g. --set train.max_steps=20")
      ->take_all();
  train->add_flag("--resume", train_flags.resume, "continue from the latest checkpoint");
  train
      ->add_option("--stop-after", train_flags.stop_after, "stop after this many steps (resumable)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  train->add_flag("--quiet", train_flags.quiet, "no progress bar");
  train->add_flag("--json", train_flags.json, "print the result as JSON");
  train->add_option("--nproc", train_flags.nproc, "worker processes on this node (data parallel)")
      ->check(CLI::Range(1, 1024));
  train->add_option("--nnodes", train_flags.nnodes, "nodes in the job")
      ->check(CLI::Range(1, 65536));
  train
      ->add_option("--node-rank", train_flags.node_rank,
                   "this node's rank (0 hosts the rendezvous)")
      ->check(CLI::Range(0, 65535));
  train->add_option("--master-addr", train_flags.master_addr,
                    "node 0's address (default 127.0.0.1)");
  train
      ->add_option("--master-port", train_flags.master_port,
                   "rendezvous port (default: a free one, one node only)")
      ->check(CLI::Range(0, 65535));
  train
      ->add_option(
          "--max-restarts", train_flags.max_restarts,
          "restart all workers from the latest checkpoint up to this many times when one fails")
      ->check(CLI::Range(0, 1000));
  train->add_option("--iface", train_flags.iface,
                    "network interface for collectives (sets dist.iface)");
  train->callback([exit_code] { *exit_code = RunTrainCommand(train_flags); });

  static EvalFlags eval_flags;
  CLI::App* eval = app.add_subcommand("eval", TorchCommandNamed("eval").description);
  eval->add_option("--config", eval_flags.config, "training config (YAML) of the run")->required();
  eval->add_option("--set", eval_flags.overrides, "override a config key")->take_all();
  CLI::Option* checkpoint = eval->add_option("--checkpoint", eval_flags.checkpoint,
                                             "checkpoint URI (default: the config's)");
  eval->add_option("--model", eval_flags.model,
                   "evaluate a registered version (models:/NAME/N, models:/NAME@ALIAS; the "
                   "registry of the config's registry section, else $REEL_REGISTRY_URI) or a "
                   ".safetensors file instead of a checkpoint")
      ->excludes(checkpoint);
  eval->add_option("--step", eval_flags.step, "checkpoint step (default: the latest)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  eval->add_option("--split", eval_flags.split, "split to evaluate (default: data.val_split)");
  eval->add_option("--clips", eval_flags.clips, "clips per video (default: data.eval_clips)")
      ->check(CLI::Range(1, 64));
  eval->add_flag("--json", eval_flags.json, "print the report as JSON");
  eval->add_option("--out", eval_flags.out, "also write the report as JSON to this file");
  eval->callback([exit_code] { *exit_code = RunEvalCommand(eval_flags); });
}

}  // namespace reel::cli
