// reel ui — the web console (src/console/console.h).
//
//   reel ui [--host H] [--port N] [--runs DIR] [--datasets DIR]... [--registry URI]
//           [--pipelines DIR] [--scheduler URL] [--serve URL]... [--no-auth]
//
// On the embedded defaults it shows what the main job leaves in ./reel-data: runs and datasets
// found under it, the registry ./reel-data/registry and the pipelines ./reel-data/pipelines.
// Prints "listening on http://ADDRESS" as its first line (with --port 0, the port it picked),
// serves until SIGINT or SIGTERM, then lets requests in flight finish.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "apps/reel/commands.h"
#include "apps/reel/stop_signals.h"
#include "console/console.h"
#include "http/server.h"
#include "registry/views.h"

namespace reel::cli {
namespace {

struct UiFlags {
  std::string host = "127.0.0.1";
  int port = 8750;
  std::string runs = "reel-data", registry, chunks, pipelines = "reel-data/pipelines", scheduler;
  std::vector<std::string> datasets, serve;
  int64_t scrape_ms = 1000;
  bool no_auth = false;
};

constexpr std::string_view kUi = "reel ui";

console::ConsoleOptions OptionsFrom(const UiFlags& f) {
  console::ConsoleOptions o;
  std::error_code ec;
  // The defaults are optional: a folder that is not there is a source not shown.
  o.runs = std::filesystem::is_directory(f.runs, ec) ? f.runs : "";
  o.datasets = f.datasets.empty() ? std::vector<std::string>{f.runs} : f.datasets;
  o.registry = registry::RegistryUriOrDefault(f.registry);
  // The default registry is shown when it exists; looking must not create one.
  if (f.registry.empty() && std::getenv("REEL_REGISTRY_URI") == nullptr &&
      !std::filesystem::is_directory(o.registry, ec)) {
    o.registry.clear();
  }
  o.registry_chunks = f.chunks;
  o.pipelines = std::filesystem::is_directory(f.pipelines, ec) ? f.pipelines : "";
  o.scheduler = f.scheduler;
  o.serve = f.serve;
  o.scrape_ms = f.scrape_ms;
  o.no_auth = f.no_auth;
  return o;
}

int RunUi(const UiFlags& f) {
  const sigset_t stop = BlockStopSignals();
  const console::ConsoleOptions options = OptionsFrom(f);
  Result<std::unique_ptr<console::Console>> console = console::Console::Open(options);
  if (!console.ok()) return Fail(kUi, console.status());
  http::Router router;
  if (Status s = (*console)->AddRoutes(&router); !s.ok()) return Fail(kUi, s);
  http::ServerOptions server_options;
  server_options.host = f.host;
  server_options.port = f.port;
  server_options.threads = 4;
  Result<std::unique_ptr<http::Server>> server =
      http::Server::Start(server_options, std::move(router));
  if (!server.ok()) return Fail(kUi, server.status());
  std::printf("listening on %s\n", (*server)->url().c_str());
  std::printf("runs %s, registry %s, pipelines %s, %s\n",
              options.runs.empty() ? "(none)" : options.runs.c_str(),
              options.registry.empty() ? "(none)" : options.registry.c_str(),
              options.pipelines.empty() ? "(none)" : options.pipelines.c_str(),
              f.no_auth ? "no auth: every caller is an admin" : "the registry's tokens required");
  std::fflush(stdout);
  std::fprintf(stderr, "reel ui: %s, stopping\n", WaitForStopSignal(stop));
  (*server)->Shutdown();
  return 0;
}

}  // namespace

void RegisterUi(CLI::App& app, int* exit_code) {
  static UiFlags f;
  CLI::App* ui =
      app.add_subcommand("ui", "the web console: runs, datasets, models, pipelines, serving");
  ui->add_option("--host", f.host, "address to listen on (default 127.0.0.1)");
  ui->add_option("--port", f.port, "port (default 8750; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  ui->add_option("--runs", f.runs, "folder searched for training runs (default ./reel-data)");
  ui->add_option("--datasets", f.datasets,
                 "folder searched for datasets (repeatable; default: the runs folder)");
  ui->add_option("--registry", f.registry,
                 "model registry: folder, postgresql://... (with --chunks) or http://...")
      ->envname("REEL_REGISTRY_URI");
  ui->add_option("--chunks", f.chunks, "the weights' store of a PostgreSQL registry");
  ui->add_option("--pipelines", f.pipelines,
                 "pipeline state folder (default ./reel-data/pipelines)");
  ui->add_option("--scheduler", f.scheduler, "the scheduler daemon's URL (reel jobs)");
  ui->add_option("--serve", f.serve, "a reel serve process's URL to watch (repeatable)");
  ui->add_option("--scrape-ms", f.scrape_ms, "how often /metrics is read (default 1000)")
      ->check(CLI::Range(int64_t{50}, int64_t{600000}));
  ui->add_flag("--no-auth", f.no_auth,
               "no tokens: every caller is an admin (for one person's local use)");
  ui->callback([exit_code] { *exit_code = RunUi(f); });
}

}  // namespace reel::cli
