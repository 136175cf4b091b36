// `reel ui`: the web console. One page (ui/src, built into the binary with its pinned npm
// libraries) and the JSON API it reads, under /ui/api, on the shared HTTP layer. ui/API.md is
// the API's reference; this header is the server's contract.
//
// What it reads, each optional:
//   runs       a folder searched 6 levels deep (a pipeline's outputs sit 5 down in its state
//              folder) for run folders: metrics.jsonl, eval.json, config.yaml and checkpoints/
//              as `reel train` writes them
//   datasets   folders searched (6 levels deep) for Reel datasets (manifest.json) and their
//              ingest_report.json
//   registry   a model registry by URI (registry/views.h's OpenRegistry: a folder, postgresql://
//              with chunks, or http:// of `reel registry serve`)
//   pipelines  the state folder of `reel pipeline run`
//   scheduler  the URL of the scheduler daemon (`reel jobs`)
//   serve      URLs of `reel serve` processes, whose /metrics it scrapes every scrape_ms
//
// Who: the registry's users and tokens (registry/access.h). Every /ui/api path but /health needs
// a valid token; runs, datasets, pipelines, jobs and serving need the reader role on "*"; a
// model's pages the reader role on that model; moving an alias writer (admin when protected);
// cancel and retry writer on "*". With no_auth every caller is an admin. Against a registry
// server the caller's own token is passed on, so that server decides.
//
// Thread-safety: the handlers run concurrently on the server's threads; the console guards its
// own state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "http/router.h"

namespace reel::console {

struct ConsoleOptions {
  std::string runs;                   // "" : no runs
  std::vector<std::string> datasets;  // folders (local)
  std::string registry;               // "" : no registry
  std::string registry_chunks;        // the weights' store of a PostgreSQL registry
  std::string pipelines;              // a pipeline state folder; "" : none
  std::string scheduler;              // http://host:port; "" : none
  std::vector<std::string> serve;     // http://host:port of reel serve processes
  int64_t scrape_ms = 1000;           // how often each serve process's /metrics is read
  size_t serving_history = 600;       // scrapes kept per server (10 minutes at 1 s)
  bool no_auth = false;
  std::string program;  // the reel binary, for `reel pipeline retry`; "" : this process's own
};

class Console {
 public:
  // Opens the registry and the pipeline store, and starts scraping the serve processes.
  // Errors: InvalidArgument for options that contradict (auth without a local or remote
  // registry to hold the tokens); the registry's and the store's.
  static Result<std::unique_ptr<Console>> Open(ConsoleOptions options);
  ~Console();  // stops the scraper
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // The page, its assets and the API. The console must outlive the server that runs them.
  Status AddRoutes(http::Router* router);

  struct State;

 private:
  explicit Console(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace reel::console
