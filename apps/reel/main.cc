// reel: the one command line of Reel (storage, smoke, datagen, ingest, train, eval, models,
// registry, serve, predict, features, pipeline, scheduler, jobs, nodes).
// Subcommands live one per file; `reel --help` lists exactly these. `reel` and `reel-torch` both
// start here: the LibTorch commands run in `reel-torch` (commands.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "apps/reel/commands.h"
#include "base/allocator.h"
#include "base/logging.h"
#include "base/sync_point.h"

int main(int argc, char** argv) {
  if (std::optional<int> failed = reel::cli::PrepareTorchCommand(argc, argv)) return *failed;
  // Training steps and served batches allocate and free the same large tensors over and over;
  // the heap keeps them instead of the kernel taking them back each time (base/allocator.h).
  reel::RetainFreedHeapMemory();
  CLI::App app{"reel: video datasets on any store, distributed training and evaluation"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("reel ") + REEL_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("REEL_LOG_LEVEL");
  bool json_logs = false;
  app.add_flag("--json-logs", json_logs, "log JSON lines even on a terminal");

  // Crash tests (REEL_CRASH_AT) kill a command at a named point, as kill -9 would.
  if (reel::Status s = reel::SyncPoint::Get().CrashAtFromEnv(); !s.ok()) {
    std::fprintf(stderr, "reel: %s\n", s.ToString().c_str());
    return 3;
  }
  int exit_code = 0;
  reel::cli::RegisterStorage(app, &exit_code);
  reel::cli::RegisterSmoke(app, &exit_code);
  reel::cli::RegisterDatagen(app, &exit_code);
  reel::cli::RegisterIngest(app, &exit_code);
  reel::cli::RegisterTorchCommands(app, &exit_code);  // train, eval, serve, predict, features
  reel::cli::RegisterModels(app, &exit_code);
  reel::cli::RegisterRegistry(app, &exit_code);
  reel::cli::RegisterPipeline(app, &exit_code);
  reel::cli::RegisterJobs(app, &exit_code);
  reel::cli::RegisterSimulate(app, &exit_code);
  reel::cli::RegisterUi(app, &exit_code);

  app.parse_complete_callback([&] {
    reel::Status status =
        reel::InitLogging(log_level, json_logs ? reel::LogFormat::kJson : reel::LogFormat::kAuto);
    if (!status.ok()) throw CLI::ValidationError("--log-level", status.message());
  });
  // The one boundary every command runs inside: the parts return errors as values, so an
  // exception that gets here is a library throwing past its adapter. It still ends as one line
  // naming the command and exit code 1, never an abort or a core dump.
  const std::string command = argc > 1 ? std::string("reel ") + argv[1] : "reel";
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad flag or value is an invalid argument (3), as the
    // README promises, not CLI11's own numbers.
    return app.exit(e) == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "%s: unexpected error of an unknown type\n", command.c_str());
    return 1;
  }
  return exit_code;
}
