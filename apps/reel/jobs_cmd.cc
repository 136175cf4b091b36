// reel scheduler serve, reel jobs submit|ls|status|logs|cancel|wait, reel nodes ls|reclaim|restore
//
//   reel scheduler serve [--cluster FILE] [--port N]     the daemon (sched/daemon.h)
//                        [--database URI --identity NAME --lease D]  several, one leading
//   reel jobs submit [--workers N|MIN:MAX] [--cpu C] [--memory M] [--gpu G] [--queue Q]
//                    [--priority P] [--spot] [--time-limit D] [--name N] [--env K=V] -- CMD...
//   reel jobs submit --executor k8s [--dry-run | --kubeconfig F [--wait]] --image I -- CMD...
//   reel jobs ls | status ID | logs ID [--worker N] | cancel ID | wait ID [--timeout D]
//   reel nodes ls | reclaim NODE | restore NODE
//
// The scheduler is --scheduler URL[,URL...] (REEL_SCHEDULER_URI; of several, the one leading), or
// the daemon serving the state folder (--state, REEL_SCHEDULER_STATE, default
// ./reel-data/scheduler): when none answers there, the command starts one in the background for
// this machine (its log: STATE/scheduler.log).
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "apps/reel/commands.h"
#include "apps/reel/models_print.h"
#include "apps/reel/scheduler_client.h"
#include "apps/reel/stop_signals.h"
#include "base/files.h"
#include "base/quantity.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "http/client.h"
#include "sched/daemon.h"
#include "sched/k8s_job.h"
#include "sched/kubectl.h"
#include "sched/shim.h"

namespace reel::cli {
// Named, not anonymous: the unity build puts this file beside the other commands.
namespace jobs_cmd {

using nlohmann::json;

struct Flags {
  std::string state = "./reel-data/scheduler";
  std::string scheduler;  // URL
  std::string cluster, host = "127.0.0.1";
  int port = 8700;
  std::string grace = "10s";
  std::string database, identity, lease = "5s";  // serve: high availability
  bool json = false;
  // submit
  std::string name, queue = "default", workers = "1", cpu = "1", memory, time_limit, ttl;
  int gpu = 0, priority = 0;
  bool spot = false;
  std::vector<std::string> env, selector, command;
  std::string executor = "local", image, k8s_namespace, priority_class;  // --executor k8s
  std::string kubeconfig, poll = "2s";
  bool dry_run = false, wait = false;
  // the others
  std::string id, node, timeout = "10m";
  int worker = 0;
};

constexpr std::string_view kJobs = "reel jobs";

std::string Absolute(const std::string& path) {
  std::error_code error;
  return std::filesystem::absolute(path, error).lexically_normal().string();
}

Result<http::Client> Connect(const Flags& f) {
  REEL_ASSIGN_OR_RETURN(std::string url, SchedulerUrl(f.scheduler, f.state));
  return http::Client::Make(url);
}

Result<json> Call(const Flags& f, std::string_view method, const std::string& target,
                  const json* body = nullptr) {
  REEL_ASSIGN_OR_RETURN(http::Client client, Connect(f));
  return client.JsonCall(method, target, body);
}

// A field of an answer, "" when it is not there (an older or newer server).
std::string Str(const json& j, const char* key) {
  const auto it = j.find(key);
  return j.is_object() && it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// One job from the server, by the id on the command line.
Result<json> GetJob(const Flags& f, const std::string& suffix = "",
                    std::string_view method = "GET") {
  if (f.id.empty() || f.id.find('/') != std::string::npos) {
    return InvalidArgumentError("'" + f.id + "' is not a job id (reel jobs ls)");
  }
  REEL_ASSIGN_OR_RETURN(json job, Call(f, method, "/v1/jobs/" + f.id + suffix));
  if (!job.is_object())
    return DataLossError("the scheduler's answer about " + f.id + " is not a job");
  return job;
}

int RunServe(const Flags& f) {
  const sigset_t stop = BlockStopSignals();
  sched::DaemonOptions o;
  o.state_dir = Absolute(f.state);
  o.cluster_file = f.cluster;
  o.host = f.host;
  o.port = f.port;
  Result<std::chrono::milliseconds> grace = ParseDuration(f.grace);
  if (!grace.ok()) return Fail("reel scheduler", grace.status());
  o.grace = *grace;
  Result<std::chrono::milliseconds> lease = ParseDuration(f.lease);
  if (!lease.ok()) return Fail("reel scheduler", lease.status());
  o.lease = *lease;
  o.database = f.database;
  o.identity = f.identity;
  o.url_file = o.state_dir + "/scheduler.url";  // the leader's
  Result<std::unique_ptr<sched::Daemon>> daemon = sched::Daemon::Start(o);
  if (!daemon.ok()) return Fail("reel scheduler", daemon.status());
  const std::string url = (*daemon)->url();
  std::printf("listening on %s\nstate in %s\n%s\n", url.c_str(), o.state_dir.c_str(),
              (*daemon)->leading() ? "leading" : "standing by");
  std::fflush(stdout);
  std::fprintf(stderr, "reel scheduler: %s, stopping (running jobs go on)\n",
               WaitForStopSignal(stop));
  Result<std::string> written = ReadFileToString(o.url_file, "scheduler address");
  std::error_code error;
  if (written.ok() && *written == url) std::filesystem::remove(o.url_file, error);
  (*daemon)->Shutdown();
  return 0;
}

Result<json> SubmitBody(const Flags& f) {
  json body = {
      {"command", f.command}, {"queue", f.queue}, {"priority", f.priority}, {"spot", f.spot}};
  if (!f.name.empty()) body["name"] = f.name;
  const size_t colon = f.workers.find(':');
  const std::optional<int64_t> min = ParseInt64(f.workers.substr(0, colon));
  const std::optional<int64_t> max =
      colon == std::string::npos ? min : ParseInt64(f.workers.substr(colon + 1));
  if (!min || !max)
    return InvalidArgumentError("--workers " + f.workers + ": expected N or MIN:MAX");
  body["workers"] = *min;
  body["max_workers"] = *max;
  body["resources"] = {{"cpu", f.cpu}, {"gpu", f.gpu}};
  if (!f.memory.empty()) body["resources"]["memory"] = f.memory;
  if (!f.time_limit.empty()) body["time_limit"] = f.time_limit;
  if (!f.ttl.empty()) body["ttl_after_finished"] = f.ttl;
  REEL_ASSIGN_OR_RETURN(const auto env, ParseKeyValues("--env", f.env));
  REEL_ASSIGN_OR_RETURN(const auto selector, ParseKeyValues("--selector", f.selector));
  body["env"] = env;
  body["node_selector"] = selector;
  std::error_code error;
  body["workdir"] = std::filesystem::current_path(error).string();
  return body;
}

// The kubeconfig kubectl would use; FailedPrecondition when there is none.
Status CheckKubeconfig(const Flags& f) {
  if (!f.kubeconfig.empty()) {
    std::error_code error;
    if (std::filesystem::exists(f.kubeconfig, error)) return Status::Ok();
    return FailedPreconditionError("no kubeconfig at " + f.kubeconfig);
  }
  const char* env = std::getenv("KUBECONFIG");
  const char* home = std::getenv("HOME");
  std::error_code error;
  if ((env != nullptr && *env != '\0') ||
      (home != nullptr && std::filesystem::exists(std::string(home) + "/.kube/config", error))) {
    return Status::Ok();
  }
  return FailedPreconditionError(
      "no kubeconfig (--kubeconfig, KUBECONFIG or ~/.kube/config) to reach a cluster; "
      "--dry-run prints the objects instead");
}

// Applied: follows the Job to its end with --wait (exit 0 when it succeeded, 1 when it failed).
Result<int> ApplyK8sJob(const Flags& f, const std::string& name, const std::string& yaml) {
  REEL_RETURN_IF_ERROR(CheckKubeconfig(f));
  sched::KubectlOptions o;
  o.kubeconfig = f.kubeconfig;
  o.k8s_namespace = f.k8s_namespace;
  REEL_ASSIGN_OR_RETURN(std::string applied, sched::ApplyK8s(yaml, o));
  std::fputs(applied.c_str(), stdout);
  std::fflush(stdout);
  if (!f.wait) return 0;
  REEL_ASSIGN_OR_RETURN(std::chrono::milliseconds poll, ParseDuration(f.poll));
  REEL_ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, ParseDuration(f.timeout));
  REEL_ASSIGN_OR_RETURN(
      sched::K8sJobState end,
      sched::FollowK8sJob(name, o, poll, timeout, Clock::System(), [&](const auto& state) {
        std::printf("job/%s %s\n", name.c_str(), state.Describe().c_str());
        std::fflush(stdout);
      }));
  return end.phase == "succeeded" ? 0 : 1;
}

// --executor k8s: the job's Kubernetes objects, printed (--dry-run) or applied.
Result<int> SubmitK8s(const Flags& f, const json& body) {
  REEL_ASSIGN_OR_RETURN(sched::JobRecord job, sched::JobFromJson(body));
  sched::K8sJobOptions o;
  o.name = f.name.empty() ? job.name : f.name;
  o.image = f.image;
  o.k8s_namespace = f.k8s_namespace;
  o.kueue_queue = f.queue;
  o.priority_class = f.priority_class;
  REEL_ASSIGN_OR_RETURN(std::string yaml, sched::EmitJobK8s(job, o));
  if (!f.dry_run) return ApplyK8sJob(f, o.name, yaml);
  std::fputs(yaml.c_str(), stdout);
  return 0;
}

int RunSubmit(const Flags& f) {
  Result<json> body = SubmitBody(f);
  if (!body.ok()) return Fail(kJobs, body.status());
  if (f.executor != "local") {
    const Result<int> done =
        f.executor == "k8s"
            ? SubmitK8s(f, *body)
            : InvalidArgumentError("--executor must be local or k8s, got '" + f.executor + "'");
    return done.ok() ? *done : Fail(kJobs, done.status());
  }
  Result<json> job = Call(f, "POST", "/v1/jobs", &*body);
  if (!job.ok()) return Fail(kJobs, job.status());
  if (f.json) return PrintJson(*job);
  std::printf("%s\n", Str(*job, "id").c_str());
  return 0;
}

void PrintJobs(const json& jobs) {
  std::printf("%-8s %-16s %-10s %-10s %4s %7s %8s %7s %8s  %s\n", "ID", "NAME", "STATE", "QUEUE",
              "PRIO", "WORKERS", "ATTEMPTS", "PREEMPT", "COST", "REASON");
  for (const json& j : jobs) {
    if (!j.is_object()) continue;
    std::printf("%-8s %-16s %-10s %-10s %4d %7d %8d %7d %8.4f  %s\n", Str(j, "id").c_str(),
                Str(j, "name").substr(0, 16).c_str(), Str(j, "state").c_str(),
                Str(j, "queue").c_str(), j.value("priority", 0), j.value("workers", 0),
                j.value("attempts", 0), j.value("preemptions", 0), j.value("cost", 0.0),
                Str(j, "reason").c_str());
  }
}

int RunLs(const Flags& f) {
  Result<json> jobs = Call(f, "GET", "/v1/jobs");
  if (!jobs.ok()) return Fail(kJobs, jobs.status());
  if (f.json) return PrintJson(*jobs);
  PrintJobs(*jobs);
  return 0;
}

int RunStatus(const Flags& f) {
  Result<json> job = GetJob(f);
  if (!job.ok()) return Fail(kJobs, job.status());
  if (f.json) return PrintJson(*job);
  PrintJobs(json::array({*job}));
  std::printf("command: %s\n", (*job)["command"].dump().c_str());
  if (job->contains("nodes") && !(*job)["nodes"].empty()) {
    std::printf("nodes: %s\n", (*job)["nodes"].dump().c_str());
  }
  return 0;
}

int RunLogs(const Flags& f) {
  if (f.id.empty() || f.id.find('/') != std::string::npos) {
    return Fail(kJobs, InvalidArgumentError("'" + f.id + "' is not a job id (reel jobs ls)"));
  }
  Result<http::Client> client = Connect(f);
  if (!client.ok()) return Fail(kJobs, client.status());
  Result<http::Response> r =
      client->Get("/v1/jobs/" + f.id + "/logs?worker=" + std::to_string(f.worker));
  if (!r.ok()) return Fail(kJobs, r.status());
  if (r->status != 200) return Fail(kJobs, http::StatusFromResponse(*r, "logs"));
  std::fwrite(r->body.data(), 1, r->body.size(), stdout);
  return 0;
}

int RunCancel(const Flags& f) {
  Result<json> job = GetJob(f, "/cancel", "POST");
  if (!job.ok()) return Fail(kJobs, job.status());
  std::printf("%s %s\n", f.id.c_str(), Str(*job, "state").c_str());
  return 0;
}

// Like `kubectl wait`: until the job ends; 0 when it succeeded.
int RunWait(const Flags& f) {
  Result<std::chrono::milliseconds> timeout = ParseDuration(f.timeout);
  if (!timeout.ok()) return Fail(kJobs, timeout.status());
  const auto deadline = std::chrono::steady_clock::now() + *timeout;
  while (true) {
    Result<json> job = GetJob(f);
    if (!job.ok()) return Fail(kJobs, job.status());
    const std::string state = Str(*job, "state"), reason = Str(*job, "reason");
    if (state == "succeeded" || state == "failed" || state == "cancelled") {
      std::printf("%s %s%s\n", f.id.c_str(), state.c_str(),
                  reason.empty() ? "" : (": " + reason).c_str());
      return state == "succeeded" ? 0 : 1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(kJobs, DeadlineExceededError("job " + f.id + " is still " + state));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int RunNodes(const Flags& f, const std::string& action) {
  if (action != "ls") {
    Result<json> r = Call(f, "POST", "/v1/nodes/" + f.node + "/" + action);
    if (!r.ok()) return Fail("reel nodes", r.status());
    if (f.json) return PrintJson(*r);
    std::printf(
        "%s %s%s\n", f.node.c_str(), action == "reclaim" ? "reclaimed" : "restored",
        r->contains("preempted") ? (", preempted: " + (*r)["preempted"].dump()).c_str() : "");
    return 0;
  }
  Result<json> nodes = Call(f, "GET", "/v1/nodes");
  if (!nodes.ok()) return Fail("reel nodes", nodes.status());
  if (f.json) return PrintJson(*nodes);
  std::printf("%-12s %6s %9s %4s  %-22s %5s %6s  %s\n", "NODE", "CPU", "MEMORY", "GPU", "FREE",
              "SPOT", "$/H", "STATE");
  for (const json& n : *nodes) {
    if (!n.is_object()) continue;
    const json free = n.value("free", json::object());
    const std::string room = Str(free, "cpu") + " cpu, " + Str(free, "memory");
    std::printf("%-12s %6s %9s %4lld  %-22s %5s %6.2f  %s\n", Str(n, "name").c_str(),
                Str(n, "cpu").c_str(), Str(n, "memory").c_str(),
                static_cast<long long>(n.value("gpu", int64_t{0})), room.c_str(),
                n.value("spot", false) ? "yes" : "no", n.value("cost_per_hour", 0.0),
                n.value("reclaimed", false) ? "reclaimed" : "ready");
  }
  return 0;
}

void AddConnection(CLI::App* app, Flags* f) {
  app->add_option("--state", f->state, "scheduler state (default ./reel-data/scheduler)")
      ->envname("REEL_SCHEDULER_STATE");
  app->add_option("--scheduler", f->scheduler, "the scheduler's URL (default: the state's)")
      ->envname("REEL_SCHEDULER_URI");
  app->add_flag("--json", f->json, "print JSON");
}

void AddSubmit(CLI::App* jobs, Flags* f, int* exit_code) {
  CLI::App* submit =
      jobs->add_subcommand("submit", "queue a job: reel jobs submit [flags] -- CMD...");
  submit->add_option("--name", f->name, "a label (default: the program)");
  submit->add_option("--queue", f->queue, "queue (default 'default')");
  submit->add_option("--priority", f->priority, "higher goes first and may preempt lower");
  submit->add_option("--workers", f->workers, "N (a gang) or MIN:MAX (elastic); default 1");
  submit->add_option("--cpu", f->cpu, "per worker (default 1)");
  submit->add_option("--memory", f->memory, "per worker, enforced (e.g. 4Gi)");
  submit->add_option("--gpu", f->gpu, "per worker")->check(CLI::NonNegativeNumber);
  submit->add_flag("--spot", f->spot, "may run on spot nodes (cheaper, can be reclaimed)");
  submit->add_option("--time-limit", f->time_limit, "stopped after this long (e.g. 2h)");
  submit->add_option("--ttl", f->ttl,
                     "remove its $REEL_SCRATCH this long after it ends (default 0s)");
  // One value per occurrence: a list option would swallow the command after it.
  submit->add_option("--env", f->env, "NAME=VALUE for every worker (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--selector", f->selector, "LABEL=VALUE a node must have (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--executor", f->executor, "local (the scheduler, default) or k8s");
  submit->add_flag("--dry-run", f->dry_run, "k8s: print the objects instead of applying them");
  submit->add_option("--kubeconfig", f->kubeconfig, "k8s: the cluster (default: kubectl's)");
  submit->add_flag("--wait", f->wait, "k8s: follow the job to its end; exit 0 if it succeeded");
  submit->add_option("--timeout", f->timeout, "k8s: with --wait, give up after (default 10m)");
  submit->add_option("--poll", f->poll, "k8s: with --wait, look this often (default 2s)");
  submit->add_option("--image", f->image, "k8s: the container image");
  submit->add_option("--namespace", f->k8s_namespace, "k8s: the namespace");
  submit->add_option("--priority-class", f->priority_class, "k8s: Kueue's priority class");
  submit->add_option("command", f->command, "the program and its arguments")->required();
  submit->callback([f, exit_code] { *exit_code = RunSubmit(*f); });
}

}  // namespace jobs_cmd

void RegisterJobs(CLI::App& app, int* exit_code) {
  using namespace jobs_cmd;  // NOLINT(google-build-using-namespace): this file's own helpers
  static jobs_cmd::Flags f;
  CLI::App* scheduler = app.add_subcommand("scheduler", "the job scheduler daemon");
  scheduler->require_subcommand(1);
  CLI::App* serve = scheduler->add_subcommand("serve", "run the scheduler: API, jobs, nodes");
  serve->add_option("--state", f.state, "jobs and logs (default ./reel-data/scheduler)")
      ->envname("REEL_SCHEDULER_STATE");
  serve->add_option("--cluster", f.cluster, "YAML of nodes and queues (default: this machine)");
  serve->add_option("--host", f.host, "address to listen on (default 127.0.0.1)");
  serve->add_option("--port", f.port, "port (default 8700; 0 picks one)")
      ->check(CLI::Range(0, 65535));
  serve->add_option("--grace", f.grace, "SIGTERM to SIGKILL when stopping a job (default 10s)");
  serve
      ->add_option("--database", f.database,
                   "jobs' database: a postgresql:// URI shared by several daemons, one leading "
                   "(default: STATE/state.db)")
      ->envname("REEL_SCHEDULER_DATABASE");
  serve->add_option("--identity", f.identity,
                    "this daemon among those sharing the database (default: the host name)");
  serve->add_option("--lease", f.lease,
                    "a standby takes over after the leader is silent this long "
                    "(default 5s)");
  serve->callback([exit_code] { *exit_code = RunServe(f); });

  CLI::App* jobs = app.add_subcommand("jobs", "submit and follow jobs on the scheduler");
  jobs->require_subcommand(1);
  jobs->fallthrough();
  AddConnection(jobs, &f);
  AddSubmit(jobs, &f, exit_code);
  jobs->add_subcommand("ls", "jobs in submission order")->callback([exit_code] {
    *exit_code = RunLs(f);
  });
  for (const char* name : {"status", "cancel"}) {
    CLI::App* sub = jobs->add_subcommand(name, std::string(name) + " a job");
    sub->add_option("id", f.id, "the job's id")->required();
    const bool status = std::string(name) == "status";
    sub->callback([exit_code, status] { *exit_code = status ? RunStatus(f) : RunCancel(f); });
  }
  CLI::App* logs = jobs->add_subcommand("logs", "a worker's output");
  logs->add_option("id", f.id, "the job's id")->required();
  logs->add_option("--worker", f.worker, "which worker (default 0)");
  logs->callback([exit_code] { *exit_code = RunLogs(f); });
  CLI::App* wait = jobs->add_subcommand("wait", "until the job ends; exit 0 if it succeeded");
  wait->add_option("id", f.id, "the job's id")->required();
  wait->add_option("--timeout", f.timeout, "give up after (default 10m)");
  wait->callback([exit_code] { *exit_code = RunWait(f); });
  CLI::App* shim = jobs->add_subcommand("shim", "");  // internal: a job's supervisor
  shim->group("");
  shim->add_option("dir", f.id)->required();
  shim->callback([exit_code] { *exit_code = sched::RunShim(f.id); });

  CLI::App* nodes = app.add_subcommand("nodes", "the scheduler's nodes");
  nodes->require_subcommand(1);
  nodes->fallthrough();
  AddConnection(nodes, &f);
  nodes->add_subcommand("ls", "capacity, free room, spot, cost")->callback([exit_code] {
    *exit_code = RunNodes(f, "ls");
  });
  for (const char* action : {"reclaim", "restore"}) {
    CLI::App* sub = nodes->add_subcommand(
        action, std::string(action) == "reclaim" ? "take a (spot) node back: its jobs are preempted"
                                                 : "let a reclaimed node take work again");
    sub->add_option("node", f.node, "the node's name")->required();
    const std::string a = action;
    sub->callback([exit_code, a] { *exit_code = RunNodes(f, a); });
  }
}

}  // namespace reel::cli
