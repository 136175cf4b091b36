// `reel serve`'s settings, shared by its files: serve_cmd.cc (one server), serve_scale_cmd.cc
// (--replicas and --emit-k8s) and serve_config.cc (serve.yaml).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "serve/batcher.h"

namespace reel::cli {

inline constexpr std::string_view kServe = "reel serve";

// One served model: its source, and its own batching and canary.
struct ModelSpec {
  std::string name;    // "" = the registered model's name or the file's stem
  std::string source;  // a models:/ URI, a run, a checkpoint, .safetensors, TorchScript
  std::string config;  // the model's YAML (model and data sections), for files that need one
  serve::BatcherOptions batching;
  std::string canary;  // a second version for a share of the requests; "" = none
  int canary_percent = 10;
};

struct ServeFlags {
  std::vector<std::string> models;  // [NAME=]URI from the command line
  std::string host = "127.0.0.1";
  int port = 8000;
  int max_batch = 8, max_delay_us = 0, instances = 1, threads = 0, max_queue = 256;
  int http_threads = 64;
  std::string precision = "fp32";  // fp32, bf16 or auto (serve::ParsePrecision)
  int stages = 1;                  // 2: each model split across this process and a stage process
  std::vector<int> preferred;
  std::string registry, config, token_file;
  std::vector<std::string> allowed_uri_prefixes;
  double max_request_mb = 64;
  std::vector<std::string> canaries;  // [NAME=]URI, each for the served model of that name
  int canary_percent = 10;
  double poll_interval_s = 5;
  std::string replicas = "1:1";
  double target_in_flight = 4, target_latency_ms = 0, scale_period_s = 2, scale_down_window_s = 60;
  // --emit-k8s
  std::string emit_k8s, image, k8s_name = "reel-serve", cpu = "2", memory = "4Gi", token_secret;

  std::string serve_config;      // --config, when it is a serve.yaml (it has `models:`)
  std::vector<ModelSpec> specs;  // every model to serve: the command line's, then serve.yaml's
};

struct ModelArg {
  std::string name, source;
};

// "NAME=URI" or "URI". A '=' after a ':' or '/' belongs to the URI or path. InvalidArgument for a
// bad name or nothing after '='.
Result<ModelArg> ParseModelArg(const std::string& arg);

// The batching the command-line flags ask for (every model's default).
serve::BatcherOptions Batching(const ServeFlags& f);

// Fills f->specs from the command line and, when --config names a serve.yaml, from it:
//   models:                                 # each: uri (required), name, config (model YAML),
//     - {uri: models:/m@production, max_batch: 8, max_delay_us: 2000, preferred_batch: [4, 8],
//        instances: 1, max_queue: 256, canary: models:/m@candidate, canary_percent: 10}
//   allow_uri_prefix: [s3://videos/]        # and poll_interval, token_file, max_request_mb
// Paths in the file are relative to its folder. Command-line models come first, with the
// command line's batching. Errors: InvalidArgument naming file:line:col and the key (unknown
// keys included), NotFound for a missing file.
Status ResolveModelSpecs(ServeFlags* f);

// "MIN:MAX", or "N" for N:N. InvalidArgument unless 1 <= MIN <= MAX.
Result<std::pair<int, int>> ParseReplicas(const std::string& text);

// --emit-k8s: the objects to FILE or stdout.
Status EmitK8sObjects(const ServeFlags& f);

// --replicas with MAX > 1: the front over worker processes; returns the exit code.
int RunFront(const ServeFlags& f, std::pair<int, int> replicas);

}  // namespace reel::cli
