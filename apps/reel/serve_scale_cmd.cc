// `reel serve --replicas` (a front over worker processes) and `--emit-k8s` (the same serving as
// Kubernetes objects): both run the models and flags of this command elsewhere.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "apps/reel/commands.h"
#include "apps/reel/serve_flags.h"
#include "apps/reel/stop_signals.h"
#include "base/files.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "http/server.h"
#include "serve/front.h"
#include "serve/k8s.h"
#include "serve/service.h"

namespace reel::cli {
namespace {

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
  flag("--precision", f.precision);
  if (f.stages > 1) flag("--stages", std::to_string(f.stages));
  flag("--max-request-mb", FormatDouble(f.max_request_mb));
  if (!f.registry.empty()) flag("--registry", f.registry);
  if (!f.config.empty()) flag("--config", f.config);
  if (!f.serve_config.empty()) flag("--config", f.serve_config);
  for (const std::string& p : f.allowed_uri_prefixes) flag("--allow-uri-prefix", p);
  for (const std::string& c : f.canaries) flag("--canary", c);
  if (!f.canaries.empty()) flag("--canary-percent", std::to_string(f.canary_percent));
  flag("--poll-interval", FormatDouble(f.poll_interval_s));
  return args;
}

// This command again, as a replica: the same models and flags on a loopback port of its own.
Result<std::vector<std::string>> ReplicaArgv(const ServeFlags& f, int threads) {
  REEL_ASSIGN_OR_RETURN(std::string self, ThisProgram());
  std::vector<std::string> argv = {self, "serve"};
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

}  // namespace

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
  http::ServerOptions server_options = serve::ServingHttpOptions(f.http_threads);
  server_options.host = f.host;
  server_options.port = f.port;
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

}  // namespace reel::cli
