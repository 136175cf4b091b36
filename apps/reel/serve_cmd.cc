// reel serve — the inference server: KServe v2 over HTTP in front of one or more models.
//
//   reel serve [NAME=]URI ... [--host H] [--port N] [--max-batch N] [--max-delay-us N]
//              [--preferred-batch N ...] [--instances N] [--threads N] [--max-queue N]
//              [--http-threads N] [--registry URI] [--config F] [--token-file F]
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
#include "apps/reel/stop_signals.h"
#include "base/files.h"
#include "base/strings.h"
#include "http/auth.h"
#include "http/server.h"
#include "registry/model_uri.h"
#include "registry/views.h"
#include "serve/follower.h"
#include "serve/front.h"
#include "serve/k8s.h"
#include "serve/model.h"
#include "serve/service.h"

namespace reel::cli {
namespace {

using serve::Service;

constexpr std::string_view kServe = "reel serve";

struct ServeFlags {
  std::vector<std::string> models;
  std::string host = "127.0.0.1";
  int port = 8000;
  int max_batch = 8, max_delay_us = 0, instances = 1, threads = 0, max_queue = 256;
  int http_threads = 64;
  std::vector<int> preferred;
  std::string registry, config, token_file;
  std::vector<std::string> allowed_uri_prefixes;
  double max_request_mb = 64;
  std::vector<std::string> canaries;
  int canary_percent = 10;
  double poll_interval_s = 5;
  std::string replicas = "1:1";
  double target_in_flight = 4, target_latency_ms = 0, scale_period_s = 2, scale_down_window_s = 60;
  // --emit-k8s
  std::string emit_k8s, image, k8s_name = "reel-serve", cpu = "2", memory = "4Gi", token_secret;
};

struct ModelArg {
  std::string name, source;
};

// "name=URI" or "URI". A '=' after a ':' or '/' belongs to the URI or path.
Result<ModelArg> ParseModelArg(const std::string& arg) {
  const size_t eq = arg.find('=');
  const size_t special = arg.find_first_of(":/");
  if (eq == std::string::npos || (special != std::string::npos && special < eq)) {
    return ModelArg{"", arg};
  }
  ModelArg m{arg.substr(0, eq), arg.substr(eq + 1)};
  REEL_RETURN_IF_ERROR(registry::CheckName(m.name, "model name"));
  if (m.source.empty()) return InvalidArgumentError("'" + arg + "': nothing after '='");
  return m;
}

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

serve::BatcherOptions Batching(const ServeFlags& f) {
  serve::BatcherOptions b;
  b.max_batch = f.max_batch;
  b.max_delay = std::chrono::microseconds(f.max_delay_us);
  b.preferred_batch_sizes = f.preferred;
  b.instances = f.instances;
  b.max_queue = f.max_queue;
  return b;
}

int ComputeThreads(const ServeFlags& f) {
  if (f.threads > 0) return f.threads;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / f.instances);
}

// Loads one [NAME=]URI and puts it in `role`; a moving reference is handed to the follower.
Status Serve(const ServeFlags& f, const std::string& arg, Service::Role role,
             serve::Service* service, serve::Follower* follower) {
  serve::LoadOptions load;
  load.registry = f.registry;
  load.config = f.config;
  REEL_ASSIGN_OR_RETURN(ModelArg m, ParseModelArg(arg));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<serve::Model> model, serve::LoadModel(m.source, load));
  const serve::ModelInfo info = model->info();
  const std::string name = m.name.empty() ? info.name : m.name;
  if (role == Service::Role::kPrimary) {
    REEL_RETURN_IF_ERROR(service->AddModel(name, std::move(model), Batching(f)));
  } else {
    REEL_RETURN_IF_ERROR(service->Swap(name, std::move(model), Batching(f), role));
    REEL_RETURN_IF_ERROR(service->SetCanaryPercent(name, f.canary_percent));
  }
  const bool follows = f.poll_interval_s > 0 && serve::IsMovingReference(m.source);
  if (follows) follower->Add({name, m.source, role, Batching(f), info.version});
  std::fprintf(stderr, "model %s version %s%s: %s (%s, %lld classes) from %s%s\n", name.c_str(),
               info.version.c_str(), role == Service::Role::kCanary ? " (canary)" : "",
               info.architecture.c_str(), info.platform.c_str(),
               static_cast<long long>(info.num_classes()), info.source.c_str(),
               follows ? (", following " + m.source).c_str() : "");
  return Status::Ok();
}

Status LoadModels(const ServeFlags& f, serve::Service* service, serve::Follower* follower) {
  for (const std::string& arg : f.models) {
    REEL_RETURN_IF_ERROR(Serve(f, arg, Service::Role::kPrimary, service, follower));
  }
  for (const std::string& arg : f.canaries) {
    REEL_RETURN_IF_ERROR(Serve(f, arg, Service::Role::kCanary, service, follower));
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
  serve::LoadOptions load;
  load.registry = f.registry;
  return [load](const std::string& uri) { return serve::LoadModel(uri, load); };
}

// "MIN:MAX", or "N" for N:N.
Result<std::pair<int, int>> ParseReplicas(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string low = text.substr(0, colon);
  const std::string high = colon == std::string::npos ? low : text.substr(colon + 1);
  const std::optional<int64_t> min = ParseInt64(low), max = ParseInt64(high);
  if (!min || !max || *min < 1 || *max < *min || *max > 10000) {
    return InvalidArgumentError("--replicas '" + text +
                                "': want MIN:MAX with 1 <= MIN <= MAX, or one count");
  }
  return std::make_pair(static_cast<int>(*min), static_cast<int>(*max));
}

// The `reel serve` arguments a pod runs: the models and every flag that shapes serving.
std::vector<std::string> PodArgs(const ServeFlags& f) {
  std::vector<std::string> args = f.models;
  const auto flag = [&](const char* name, const std::string& value) {
    args.insert(args.end(), {name, value});
  };
  flag("--max-batch", std::to_string(f.max_batch));
  flag("--max-delay-us", std::to_string(f.max_delay_us));
  for (int p : f.preferred) flag("--preferred-batch", std::to_string(p));
  flag("--instances", std::to_string(f.instances));
  if (f.threads > 0) flag("--threads", std::to_string(f.threads));
  flag("--max-queue", std::to_string(f.max_queue));
  flag("--http-threads", std::to_string(f.http_threads));
  flag("--max-request-mb", FormatDouble(f.max_request_mb));
  if (!f.registry.empty()) flag("--registry", f.registry);
  if (!f.config.empty()) flag("--config", f.config);
  for (const std::string& p : f.allowed_uri_prefixes) flag("--allow-uri-prefix", p);
  for (const std::string& c : f.canaries) flag("--canary", c);
  if (!f.canaries.empty()) flag("--canary-percent", std::to_string(f.canary_percent));
  flag("--poll-interval", FormatDouble(f.poll_interval_s));
  return args;
}

Status EmitK8sObjects(const ServeFlags& f) {
  if (f.image.empty()) {
    return InvalidArgumentError("--emit-k8s needs --image: the container image holding reel");
  }
  serve::K8sOptions k;
  k.name = f.k8s_name;
  k.image = f.image;
  k.args = PodArgs(f);
  if (f.port != 0) k.port = f.port;
  REEL_ASSIGN_OR_RETURN(std::tie(k.min_replicas, k.max_replicas), ParseReplicas(f.replicas));
  k.min_available = k.min_replicas > 1 ? 1 : 0;  // one pod alone must not block a node drain
  k.cpu = f.cpu;
  k.memory = f.memory;
  k.token_secret = f.token_secret;
  // models:/ URIs in the pod need the registry this shell names, unless --registry does.
  const char* registry = std::getenv("REEL_REGISTRY_URI");
  if (f.registry.empty() && registry) k.env.emplace_back("REEL_REGISTRY_URI", registry);
  REEL_ASSIGN_OR_RETURN(std::string yaml, serve::EmitK8s(k));
  if (f.emit_k8s == "-") {
    std::fputs(yaml.c_str(), stdout);
    return Status::Ok();
  }
  return WriteFileAtomically(f.emit_k8s, yaml);
}

// This command again, as a replica: the same models and flags on a loopback port of its own.
Result<std::vector<std::string>> ReplicaArgv(const ServeFlags& f, int threads) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return ErrnoToStatus(errno, "readlink /proc/self/exe");
  std::vector<std::string> argv = {std::string(self, static_cast<size_t>(n)), "serve"};
  for (std::string& a : PodArgs(f)) argv.push_back(std::move(a));
  argv.insert(argv.end(), {"--host", "127.0.0.1", "--port", "0"});
  if (f.threads == 0) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
  if (!f.token_file.empty()) argv.insert(argv.end(), {"--token-file", f.token_file});
  return argv;
}

serve::FrontOptions FrontOptionsFor(const ServeFlags& f, std::pair<int, int> replicas) {
  serve::FrontOptions o;
  o.scale.min_replicas = replicas.first;
  o.scale.max_replicas = replicas.second;
  o.scale.target_in_flight = f.target_in_flight;
  o.scale.target_latency_ms = f.target_latency_ms;
  const auto ms = [](double s) {
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  };
  o.scale.scale_down_window = ms(f.scale_down_window_s);
  o.period = ms(f.scale_period_s);
  return o;
}

int RunFront(const ServeFlags& f, std::pair<int, int> replicas) {
  const sigset_t stop = BlockStopSignals();
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads =
      f.threads > 0 ? f.threads : std::max(1, cores / (replicas.second * f.instances));
  Result<std::vector<std::string>> argv = ReplicaArgv(f, threads);
  if (!argv.ok()) return Fail(kServe, argv.status());
  const serve::StartReplicaFn start = [argv = *argv] {
    return serve::StartProcessReplica(argv, std::chrono::minutes(5));
  };
  Result<std::unique_ptr<serve::Front>> front =
      serve::Front::Start(FrontOptionsFor(f, replicas), start);
  if (!front.ok()) return Fail(kServe, front.status());
  http::Router router;
  if (Status s = (*front)->AddRoutes(&router); !s.ok()) return Fail(kServe, s);
  http::ServerOptions server_options;
  server_options.host = f.host;
  server_options.port = f.port;
  server_options.threads = f.http_threads;
  server_options.max_body_bytes = static_cast<uint64_t>(f.max_request_mb * (1 << 20));
  Result<std::unique_ptr<http::Server>> server =
      http::Server::Start(server_options, std::move(router));
  if (!server.ok()) return Fail(kServe, server.status());
  std::printf("listening on %s\n", (*server)->url().c_str());
  std::printf(
      "front: %d..%d replicas, %d instance(s) x %d LibTorch thread(s) each, target %s "
      "requests in flight per replica\n",
      replicas.first, replicas.second, f.instances, threads,
      FormatDouble(f.target_in_flight).c_str());
  std::fflush(stdout);
  (*front)->RunScaling();
  std::fprintf(stderr, "reel serve: %s, stopping\n", WaitForStopSignal(stop));
  (*server)->Shutdown();  // answers what the replicas still hold for it
  (*front)->Shutdown();   // then each replica drains and exits
  return 0;
}

int RunModelServer(const ServeFlags& f) {
  if (!f.emit_k8s.empty()) {
    const Status s = EmitK8sObjects(f);
    return s.ok() ? 0 : Fail(kServe, s);
  }
  Result<std::pair<int, int>> replicas = ParseReplicas(f.replicas);
  if (!replicas.ok()) return Fail(kServe, replicas.status());
  if (replicas->second > 1) return RunFront(f, *replicas);
  const sigset_t stop = BlockStopSignals();
  if (Status s = Batching(f).Validate(); !s.ok()) return Fail(kServe, s);
  serve::SetComputeThreads(ComputeThreads(f));
  serve::ServiceOptions options;
  options.max_request_bytes = static_cast<uint64_t>(f.max_request_mb * (1 << 20));
  options.allowed_uri_prefixes = f.allowed_uri_prefixes;
  serve::Service service(options);
  serve::Follower follower(&service, RegistryResolver(f.registry), RegistryLoader(f));
  if (Status s = LoadModels(f, &service, &follower); !s.ok()) return Fail(kServe, s);
  http::Router router;
  if (Status s = service.AddRoutes(&router); !s.ok()) return Fail(kServe, s);
  http::ServerOptions server_options;
  server_options.host = f.host;
  server_options.port = f.port;
  server_options.threads = f.http_threads;
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
      "compute: %d instance(s) x %d LibTorch thread(s), OMP_WAIT_POLICY=%s; %d HTTP threads\n",
      f.instances, ComputeThreads(f), wait_policy ? wait_policy : "(unset)", f.http_threads);
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

void EnsurePassiveOpenMp(int argc, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  int i = 1;  // the subcommand: the first word that is neither an option nor --log-level's value
  while (i < argc && argv[i][0] == '-') i += std::string_view(argv[i]) == "--log-level" ? 2 : 1;
  if (i >= argc || std::string_view(argv[i]) != "serve") return;
  // libgomp reads its environment once, when it is loaded: set it, then start again.
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: serve with spinning threads then
}

void RegisterServe(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand("serve", "serve models over KServe v2 HTTP");
  serve
      ->add_option("models", f->models,
                   "[NAME=]URI: models:/name@alias, a run, a checkpoint, "
                   "a .safetensors file, a TorchScript file")
      ->required();
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
}

}  // namespace reel::cli
