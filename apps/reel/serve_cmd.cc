// reel serve — the inference server: KServe v2 over HTTP in front of one or more models.
//
//   reel serve [NAME=]URI ... [--config serve.yaml] [--host H] [--port N] [--max-batch N]
//   [--max-delay-us N]
//              [--preferred-batch N ...] [--instances N] [--threads N] [--max-queue N]
//              [--http-threads N] [--registry URI] [--config F] [--token-file F] [--stages 2]
//              [--allow-uri-prefix P ...] [--canary [NAME=]URI] [--canary-percent P]
//              [--poll-interval S] [--replicas MIN:MAX [--target-in-flight N]
//              [--target-latency-ms MS] [--scale-period S] [--scale-down-window S]]
//   reel serve [NAME=]URI ... --emit-k8s FILE --image IMAGE [--k8s-name N] [--cpu C]
//              [--memory M] [--token-secret S] [serving flags]
//
// URI: models:/name@alias or models:/name/4 (the registry), a run folder, a checkpoint, a
// .safetensors file (with --config) or a TorchScript file (serve/model.h). NAME defaults to the
// registered model's name or the file's stem. Prints "listening on http://ADDRESS" as its first
// line (with --port 0, the port it picked), then one line per model; serves until SIGINT or
// SIGTERM, then stops accepting, answers the requests in flight and exits 0.
//
// A model served from an alias or branch (models:/name@production) follows it: every
// --poll-interval seconds the reference is resolved, and a new version is loaded, warmed up and
// swapped in while the old one drains (serve/follower.h). --canary serves a second version of a
// model to --canary-percent of its requests, chosen by request id; it follows its alias too.
//
// --replicas MIN:MAX (MAX > 1) runs a front on the address that balances over MIN..MAX worker
// processes of this command and scales them by load (serve/front.h); each gets an equal share of
// the cores (--threads), so at MAX replicas the cores are not oversubscribed.
//
// --stages 2 splits each model between this process and a `reel serve-stage` process that holds
// the second half's weights (serve/stages.h: model parallel, for a model that does not fit one
// worker); the answers are the same.
//
// --emit-k8s writes the Kubernetes objects that serve the same models with the same flags
// (serve/k8s.h: Deployment, Service, HorizontalPodAutoscaler over --replicas, disruption budget)
// to FILE ("-": standard output) and exits without serving.
//
// Cores are never oversubscribed by default: instances × LibTorch threads = the cores, and
// OpenMP's threads sleep instead of spinning between batches (OMP_WAIT_POLICY=PASSIVE, unless
// set), because a spinning thread steals the core the HTTP threads parse on.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/reel/commands.h"
#include "apps/reel/serve_flags.h"
#include "apps/reel/stop_signals.h"
#include "apps/reel/torch_commands.h"
#include "base/files.h"
#include "base/strings.h"
#include "http/auth.h"
#include "http/server.h"
#include "models/cpu_allocator.h"
#include "registry/model_uri.h"
#include "registry/views.h"
#include "serve/follower.h"
#include "serve/front.h"
#include "serve/k8s.h"
#include "serve/model.h"
#include "serve/service.h"
#include "serve/stages.h"

namespace reel::cli {
namespace {

using serve::Service;

// Tokens, one per line ('#' comments and blank lines skipped), as the auth hook's hashes.
Result<std::vector<std::string>> TokenHashes(const std::string& path) {
  REEL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "token file"));
  std::vector<std::string> hashes;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t last = line.find_last_not_of(" \t\r");
    hashes.push_back(http::HashToken(std::string_view(line).substr(first, last - first + 1)));
  }
  if (hashes.empty()) return InvalidArgumentError("token file '" + path + "' holds no token");
  return hashes;
}

// Bearer tokens on everything but the health probes (Kubernetes' kubelet has no token).
std::function<Status(const http::Request&)> AuthHook(std::vector<std::string> hashes) {
  auto bearer = http::BearerAuth(std::move(hashes));
  return [bearer](const http::Request& request) {
    if (request.path.rfind("/v2/health/", 0) == 0) return Status::Ok();
    return bearer(request);
  };
}

int ComputeThreads(const ServeFlags& f) {
  if (f.threads > 0) return f.threads;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / f.instances);
}

// How every served model loads: from the flags' registry, in the flags' precision.
Result<serve::LoadOptions> LoadOptionsOf(const ServeFlags& f) {
  serve::LoadOptions load;
  load.registry = f.registry;
  REEL_ASSIGN_OR_RETURN(load.precision, serve::ParsePrecision(f.precision));
  load.stages = f.stages;
  return load;
}

// Loads `source` and puts it in `role` of the model served as `name` ("" = the model's own
// name); a moving reference is handed to the follower. Returns the name it is served under.
Result<std::string> Serve(const ServeFlags& f, const ModelSpec& spec, const std::string& source,
                          Service::Role role, serve::Service* service, serve::Follower* follower) {
  REEL_ASSIGN_OR_RETURN(serve::LoadOptions load, LoadOptionsOf(f));
  load.config = spec.config;
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<serve::Model> model, serve::LoadModel(source, load));
  const serve::ModelInfo info = model->info();
  const std::string name = spec.name.empty() ? info.name : spec.name;
  if (role == Service::Role::kPrimary) {
    REEL_RETURN_IF_ERROR(service->AddModel(name, std::move(model), spec.batching));
  } else {
    REEL_RETURN_IF_ERROR(service->Swap(name, std::move(model), spec.batching, role));
    REEL_RETURN_IF_ERROR(service->SetCanaryPercent(name, spec.canary_percent));
  }
  const bool follows = f.poll_interval_s > 0 && serve::IsMovingReference(source);
  if (follows) follower->Add({name, source, role, spec.batching, info.version});
  std::fprintf(stderr, "model %s version %s%s: %s (%s%s, %lld classes) from %s%s%s\n", name.c_str(),
               info.version.c_str(), role == Service::Role::kCanary ? " (canary)" : "",
               info.architecture.c_str(), info.platform.c_str(),
               info.optimization.empty() ? "" : (", " + info.optimization).c_str(),
               static_cast<long long>(info.num_classes()), info.source.c_str(),
               follows ? (", following " + source).c_str() : "",
               info.placement.empty() ? "" : ("; " + info.placement).c_str());
  return name;
}

Status LoadModels(const ServeFlags& f, serve::Service* service, serve::Follower* follower) {
  for (const ModelSpec& spec : f.specs) {
    REEL_ASSIGN_OR_RETURN(std::string name,
                          Serve(f, spec, spec.source, Service::Role::kPrimary, service, follower));
    if (spec.canary.empty()) continue;
    ModelSpec canary = spec;
    canary.name = name;
    REEL_RETURN_IF_ERROR(
        Serve(f, canary, spec.canary, Service::Role::kCanary, service, follower).status());
  }
  for (const std::string& arg : f.canaries) {  // --canary [NAME=]URI
    REEL_ASSIGN_OR_RETURN(ModelArg m, ParseModelArg(arg));
    ModelSpec canary;
    canary.name = m.name;
    canary.config = f.config;
    canary.batching = Batching(f);
    canary.canary_percent = f.canary_percent;
    REEL_RETURN_IF_ERROR(
        Serve(f, canary, m.source, Service::Role::kCanary, service, follower).status());
  }
  return Status::Ok();
}

// The follower's view of the registry: opened on first use, from the follower's thread only.
serve::ResolveFn RegistryResolver(const std::string& configured) {
  auto registry = std::make_shared<std::unique_ptr<registry::Registry>>();
  return [registry, configured](const std::string& uri) -> Result<int64_t> {
    if (!*registry) {
      REEL_ASSIGN_OR_RETURN(*registry,
                            registry::OpenRegistry(registry::RegistryUriOrDefault(configured), ""));
    }
    REEL_ASSIGN_OR_RETURN(registry::ModelRef ref, registry::ParseModelUri(uri));
    REEL_ASSIGN_OR_RETURN(registry::VersionId id, (*registry)->Resolve(ref));
    return id.version;
  };
}

serve::LoadFn RegistryLoader(const ServeFlags& f) {
  Result<serve::LoadOptions> load = LoadOptionsOf(f);
  return [load](const std::string& uri) -> Result<std::unique_ptr<serve::Model>> {
    if (!load.ok()) return load.status();
    return serve::LoadModel(uri, *load);
  };
}

struct StageFlags {
  serve::StageServerOptions options;
  std::string precision = "fp32", address_file;
  int threads = 0;
};

// reel serve-stage: the second stage of a model `reel serve --stages 2` splits (serve/stages.h).
// Writes its address to --address-file once it listens, and serves until SIGTERM.
int RunStageServer(StageFlags f) {
  constexpr std::string_view kStage = "reel serve-stage";
  const sigset_t stop = BlockStopSignals();
  Result<serve::Precision> precision = serve::ParsePrecision(f.precision);
  if (!precision.ok()) return Fail(kStage, precision.status());
  f.options.load.precision = *precision;
  models::UseCachingCpuAllocator();
  if (f.threads > 0) serve::SetComputeThreads(f.threads);
  Result<std::unique_ptr<serve::StageServer>> server = serve::StageServer::Start(f.options);
  if (!server.ok()) return Fail(kStage, server.status());
  // On standard error: standard output is reel serve's, whose first line is its own address.
  std::fprintf(stderr, "reel serve-stage: %s of %s listening on %s\n",
               (*server)->Describe().c_str(), f.options.source.c_str(),
               (*server)->address().c_str());
  if (!f.address_file.empty()) {
    if (Status s = WriteFileAtomically(f.address_file, (*server)->address()); !s.ok()) {
      return Fail(kStage, s);
    }
  }
  WaitForStopSignal(stop);
  return 0;
}

void RegisterServeStage(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<StageFlags>();
  CLI::App* stage = app.add_subcommand("serve-stage", TorchCommandNamed("serve-stage").description);
  stage->group("");  // started by reel serve, not typed
  stage->add_option("source", f->options.source, "the model, as reel serve takes it")->required();
  stage->add_option("--from-unit", f->options.from_unit, "the first unit this stage runs")
      ->required();
  stage->add_option("--address-file", f->address_file, "where to write host:port once listening");
  stage->add_option("--host", f->options.host, "address to listen on (default 127.0.0.1)");
  stage->add_option("--port", f->options.port, "port (default 0: a free one)");
  stage->add_option("--precision", f->precision, "fp32, bf16 or auto")
      ->check(CLI::IsMember({"fp32", "bf16", "auto"}));
  stage->add_option("--registry", f->options.load.registry, "registry for models:/ URIs");
  stage->add_option("--config", f->options.load.config, "YAML with model and data sections");
  stage->add_option("--threads", f->threads, "LibTorch threads (default: every core)");
  stage->callback([f, exit_code] { *exit_code = RunStageServer(*f); });
}

int RunModelServer(ServeFlags f) {
  if (Status s = ResolveModelSpecs(&f); !s.ok()) return Fail(kServe, s);
  if (f.specs.empty()) {
    return Fail(kServe, InvalidArgumentError("no model to serve: name one ([NAME=]URI) or "
                                             "--config a serve.yaml that lists models"));
  }
  if (!f.emit_k8s.empty()) {
    const Status s = EmitK8sObjects(f);
    return s.ok() ? 0 : Fail(kServe, s);
  }
  Result<std::pair<int, int>> replicas = ParseReplicas(f.replicas);
  if (!replicas.ok()) return Fail(kServe, replicas.status());
  if (replicas->second > 1) return RunFront(f, *replicas);
  const sigset_t stop = BlockStopSignals();
  for (const ModelSpec& spec : f.specs) {
    if (Status s = spec.batching.Validate(); !s.ok()) return Fail(kServe, s);
  }
  models::UseCachingCpuAllocator();
  serve::SetComputeThreads(ComputeThreads(f));
  serve::ServiceOptions options;
  options.max_request_bytes = static_cast<uint64_t>(f.max_request_mb * (1 << 20));
  options.allowed_uri_prefixes = f.allowed_uri_prefixes;
  serve::Service service(options);
  serve::Follower follower(&service, RegistryResolver(f.registry), RegistryLoader(f));
  if (Status s = LoadModels(f, &service, &follower); !s.ok()) return Fail(kServe, s);
  http::Router router;
  if (Status s = service.AddRoutes(&router); !s.ok()) return Fail(kServe, s);
  http::ServerOptions server_options = serve::ServingHttpOptions(f.http_threads);
  server_options.host = f.host;
  server_options.port = f.port;
  server_options.max_body_bytes = options.max_request_bytes;
  if (!f.token_file.empty()) {
    Result<std::vector<std::string>> hashes = TokenHashes(f.token_file);
    if (!hashes.ok()) return Fail(kServe, hashes.status());
    server_options.auth = AuthHook(std::move(*hashes));
  }
  Result<std::unique_ptr<http::Server>> server =
      http::Server::Start(server_options, std::move(router));
  if (!server.ok()) return Fail(kServe, server.status());
  std::printf("listening on %s\n", (*server)->url().c_str());
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf(
      "compute: %d instance(s) x %d LibTorch thread(s), OMP_WAIT_POLICY=%s, %s; HTTP: %d io "
      "threads, %d requests at once\n",
      f.instances, ComputeThreads(f), wait_policy ? wait_policy : "(unset)",
      serve::PrecisionName(serve::ParsePrecision(f.precision).value_or(serve::Precision::kFp32)),
      server_options.threads, f.http_threads);
  std::fflush(stdout);
  if (f.poll_interval_s > 0) {
    follower.Start(std::chrono::milliseconds(static_cast<int64_t>(f.poll_interval_s * 1000)));
  }
  std::fprintf(stderr, "reel serve: %s, stopping\n", WaitForStopSignal(stop));
  follower.Stop();  // no swap starts while the server drains
  (*server)->Shutdown();
  service.Shutdown();
  return 0;
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand("serve", TorchCommandNamed("serve").description);
  serve->add_option("models", f->models,
                    "[NAME=]URI: models:/name@alias, a run, a checkpoint, "
                    "a .safetensors file, a TorchScript file (or none, with a serve.yaml)");
  serve->add_option("--host", f->host, "address to listen on (default 127.0.0.1)");
  serve->add_option("--port", f->port, "port (default 8000; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  serve->add_option("--max-batch", f->max_batch, "samples per forward pass (default 8)")
      ->check(CLI::Range(1, 4096));
  serve
      ->add_option("--max-delay-us", f->max_delay_us,
                   "how long a request may wait for a fuller batch (default 0)")
      ->check(CLI::Range(0, 60'000'000));
  serve->add_option("--preferred-batch", f->preferred, "batch sizes to aim for (repeatable)");
  serve->add_option("--instances", f->instances, "forward passes at once per model (default 1)")
      ->check(CLI::Range(1, 256));
  serve
      ->add_option("--threads", f->threads,
                   "LibTorch threads per forward (default: cores / instances)")
      ->check(CLI::Range(0, 1024));
  serve->add_option("--max-queue", f->max_queue, "waiting requests per model before 503 (256)")
      ->check(CLI::Range(1, 1'000'000));
  serve->add_option("--http-threads", f->http_threads, "requests handled at once (default 64)")
      ->check(CLI::Range(1, 4096));
  serve
      ->add_option("--precision", f->precision,
                   "fp32 (default), bf16 (autocast: ~2.6x faster on a CPU with bf16 units, "
                   "scores differ in the third digit) or auto (bf16 where the CPU has them)")
      ->check(CLI::IsMember({"fp32", "bf16", "auto"}));
  serve
      ->add_option("--stages", f->stages,
                   "2: split each model between this process and a stage process holding the "
                   "second half's weights (model parallel; Reel's video ResNets; default 1)")
      ->check(CLI::Range(1, 2));
  serve->add_option("--max-request-mb", f->max_request_mb, "largest request body (default 64)")
      ->check(CLI::PositiveNumber);
  serve->add_option("--registry", f->registry,
                    "registry for models:/ URIs (default $REEL_REGISTRY_URI, else "
                    "./reel-data/registry)");
  serve->add_option("--config", f->config,
                    "YAML with model and data sections, for a .safetensors or TorchScript file");
  serve->add_option("--allow-uri-prefix", f->allowed_uri_prefixes,
                    "a folder or store URI the 'uri' input may read videos from (repeatable)");
  serve->add_option("--token-file", f->token_file,
                    "bearer tokens, one per line; every path but /v2/health needs one");
  serve
      ->add_option("--canary", f->canaries,
                   "[NAME=]URI: a second version of a served model for a share of its requests")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  serve->add_option("--canary-percent", f->canary_percent, "the canaries' share (default 10)")
      ->check(CLI::Range(0, 100));
  serve
      ->add_option("--poll-interval", f->poll_interval_s,
                   "seconds between checks of followed aliases (default 5; 0: never)")
      ->check(CLI::Range(0.0, 86400.0));
  serve->add_option("--replicas", f->replicas,
                    "MIN:MAX worker processes behind a front that scales them (or pods, with "
                    "--emit-k8s; default 1:1)");
  serve
      ->add_option("--target-in-flight", f->target_in_flight,
                   "--replicas: requests in flight per replica to scale toward (4)")
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--target-latency-ms", f->target_latency_ms,
                   "--replicas: mean latency to scale toward (default 0: not used)")
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--scale-period", f->scale_period_s, "--replicas: seconds between decisions (2)")
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--scale-down-window", f->scale_down_window_s,
                   "--replicas: seconds of low load before scaling down (60)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--emit-k8s", f->emit_k8s,
                    "write Kubernetes objects serving these models to FILE ('-': stdout), exit");
  serve->add_option("--image", f->image, "--emit-k8s: the container image holding reel");
  serve->add_option("--k8s-name", f->k8s_name, "--emit-k8s: the objects' name (reel-serve)");
  serve->add_option("--cpu", f->cpu, "--emit-k8s: CPU request and limit per pod (2)");
  serve->add_option("--memory", f->memory, "--emit-k8s: memory request and limit per pod (4Gi)");
  serve->add_option("--token-secret", f->token_secret,
                    "--emit-k8s: a Secret whose 'tokens' key is mounted as --token-file");
  serve->callback([f, exit_code] { *exit_code = RunModelServer(*f); });
  RegisterServeStage(app, exit_code);
}

}  // namespace reel::cli
