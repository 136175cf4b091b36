// The `reel` command line: one file per subcommand. Each Register* adds its subcommand to the
// app and arranges for its exit code to land in *exit_code when it runs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::cli {

void RegisterStorage(CLI::App& app, int* exit_code);
void RegisterSmoke(CLI::App& app, int* exit_code);
void RegisterIngest(CLI::App& app, int* exit_code);
void RegisterDatagen(CLI::App& app, int* exit_code);
void RegisterTrain(CLI::App& app, int* exit_code);     // reel train and reel eval
void RegisterModels(CLI::App& app, int* exit_code);    // reel models ...
void RegisterRegistry(CLI::App& app, int* exit_code);  // reel registry serve|user|grant
void RegisterServe(CLI::App& app, int* exit_code);     // reel serve (inference)
void RegisterPredict(CLI::App& app, int* exit_code);   // reel predict (offline inference)
void RegisterFeatures(CLI::App& app, int* exit_code);  // reel features (embeddings per clip)
void RegisterPipeline(CLI::App& app, int* exit_code);  // reel pipeline run|retry|ls|status|logs
void RegisterJobs(CLI::App& app, int* exit_code);  // reel scheduler serve, reel jobs, reel nodes
void RegisterSimulate(CLI::App& app, int* exit_code);  // reel sched simulate
void RegisterUi(CLI::App& app, int* exit_code);        // reel ui (the web console)

// For `reel serve` and `reel predict`: when OMP_WAIT_POLICY is unset, sets it to PASSIVE and starts
// this process again (OpenMP reads it only when loaded). Call first in main; returns for every
// other command.
void EnsurePassiveOpenMp(int argc, char** argv);

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
