// The `reel` command line: one file per subcommand. Each Register* adds its subcommand to the
// app and arranges for its exit code to land in *exit_code when it runs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::cli {

void RegisterStorage(CLI::App& app, int* exit_code);
void RegisterSmoke(CLI::App& app, int* exit_code);
void RegisterIngest(CLI::App& app, int* exit_code);
void RegisterDatagen(CLI::App& app, int* exit_code);
void RegisterModels(CLI::App& app, int* exit_code);    // reel models ...
void RegisterRegistry(CLI::App& app, int* exit_code);  // reel registry serve|user|grant
void RegisterPipeline(CLI::App& app, int* exit_code);  // reel pipeline run|retry|ls|status|logs
void RegisterJobs(CLI::App& app, int* exit_code);  // reel scheduler serve, reel jobs, reel nodes
void RegisterSimulate(CLI::App& app, int* exit_code);  // reel sched simulate
void RegisterUi(CLI::App& app, int* exit_code);        // reel ui (the web console)

// The commands that run LibTorch. Every process that links LibTorch spends 0.4 s in its static
// initialisers and 290 shared libraries before main, so `reel` does not link it: it hands these
// commands to `reel-torch`, installed beside it, which has every command.
struct TorchCommand {
  const char* name;
  const char* description;
  bool internal;  // started by another command, not typed: left out of --help
  // OpenMP's threads sleep when idle (OMP_WAIT_POLICY=PASSIVE, read once when LibTorch loads):
  // spinning, they would take the cores a server's requests and a prediction's decoders need.
  bool passive_openmp;
};
inline constexpr TorchCommand kTorchCommands[] = {
    {"train", "train a video classifier from a YAML config", false, false},
    {"eval", "evaluate a checkpoint: top-1/5, per class, video level", false, false},
    {"serve", "serve models over KServe v2 HTTP", false, true},
    {"serve-stage", "the second stage of a model split by reel serve --stages 2 (internal)", true,
     false},
    {"predict", "classify every video of a folder, prefix, CSV/JSONL list or dataset", false, true},
    {"features", "write one embedding per clip of a dataset, for training a head on them", false,
     false},
};
// kTorchCommands' entry for `name`, or null.
const TorchCommand* FindTorchCommand(std::string_view name);
// The same where there must be one; a bug (crash) when there is none.
const TorchCommand& TorchCommandNamed(std::string_view name);

// The subcommand argv names: its first word that is neither an option nor --log-level's value
// ("" when there is none).
std::string_view SubcommandOf(int argc, char** argv);

// Called first in main. In `reel`: when argv names a LibTorch command, replaces this process with
// `reel-torch` and returns only the exit code of a failure to start it (its line printed). In
// `reel-torch`: for `serve` and `predict` with OMP_WAIT_POLICY unset, sets it to PASSIVE and
// starts again (OpenMP reads it only when loaded). Returns nothing for every other command.
std::optional<int> PrepareTorchCommand(int argc, char** argv);

// kTorchCommands: in `reel`, hand-offs listed in --help (torch_handoff.cc); in `reel-torch`, the
// commands themselves (torch_commands.cc).
void RegisterTorchCommands(CLI::App& app, int* exit_code);

// The exit code for a failed command: 2 not found, 3 invalid input, 4 permission denied,
// 5 unavailable, 6 failed precondition, 1 anything else.
inline int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return 2;
    case StatusCode::kInvalidArgument:
      return 3;
    case StatusCode::kPermissionDenied:
      return 4;
    case StatusCode::kUnavailable:
      return 5;
    case StatusCode::kFailedPrecondition:
      return 6;
    default:
      return 1;
  }
}

// KEY=VALUE flags (--tag, --input, --env) as a map; `what` names the flag in the error:
// "--input 'x': expected KEY=VALUE".
inline Result<std::map<std::string, std::string>> ParseKeyValues(
    std::string_view what, const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError(std::string(what) + " '" + item + "': expected KEY=VALUE");
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

// Prints "COMMAND: message" on stderr as one line and returns the status's exit code.
inline int Fail(std::string_view command, const Status& status) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(command.size()), command.data(),
               status.ToString().c_str());
  return ExitCodeFor(status);
}

}  // namespace reel::cli
