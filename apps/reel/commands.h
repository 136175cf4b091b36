// The `reel` command line: one file per subcommand. Each Register* adds its subcommand to the
// app and arranges for its exit code to land in *exit_code when it runs.
#pragma once

#include <CLI/CLI.hpp>

namespace reel::cli {

void RegisterStorage(CLI::App& app, int* exit_code);
void RegisterSmoke(CLI::App& app, int* exit_code);
void RegisterIngest(CLI::App& app, int* exit_code);
void RegisterDatagen(CLI::App& app, int* exit_code);

}  // namespace reel::cli
