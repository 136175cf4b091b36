#include "sched/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/config.h"
#include "base/files.h"
#include "base/json.h"
#include "base/logging.h"
#include "base/quantity.h"
#include "base/stop_request.h"
#include "base/subprocess.h"
#include "http/server.h"
#include "sched/job_runner.h"
#include "sched/jobs.h"
#include "sched/lease.h"
#include "sched/runner.h"
#include "sched/runner_internal.h"

namespace reel::sched {
namespace {

namespace fs = std::filesystem;
using http::Request;
using http::Response;
using internal::CoreMap;
using nlohmann::json;

// A node's `cpuset`: cores of this machine it owns, pinned to its jobs' workers. Cores the
// daemon may not run on are refused (a worker pinned to them could not start).
Status LoadCpuset(const ConfigNode& e, const std::string& node, CoreMap* cores) {
  REEL_ASSIGN_OR_RETURN(std::string text, e.GetString("cpuset", ""));
  Result<std::vector<int>> list = ParseCpuList(text);
  if (!list.ok()) return e.Error(std::string(list.status().message()));
  const std::vector<int> allowed = AllowedCpus();
  for (int c : *list) {
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      return e.Error("cpuset " + text + " names core " + std::to_string(c) +
                     ", which this machine does not let Reel use (it may use " +
                     FormatCpuList(allowed) + ")");
    }
  }
  if (!list->empty()) (*cores)[node] = *list;
  return Status::Ok();
}

Status LoadNodes(const ConfigNode& root, std::vector<Node>* nodes, CoreMap* cores) {
  REEL_ASSIGN_OR_RETURN(ConfigNode list, root.Child("nodes"));
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> elements, list.Elements());
  for (const ConfigNode& e : elements) {
    REEL_RETURN_IF_ERROR(
        e.CheckKeys({"name", "cpu", "memory", "gpu", "spot", "cost_per_hour", "labels", "cpuset"}));
    Node n;
    REEL_ASSIGN_OR_RETURN(n.name, e.GetString("name"));
    REEL_ASSIGN_OR_RETURN(n.capacity, internal::ReadResources(e, Resources{-1, -1, 0}, false));
    if (n.capacity.cpu_millis < 0 || n.capacity.memory_bytes < 0) {
      return e.Error("a node needs cpu and memory");
    }
    REEL_ASSIGN_OR_RETURN(n.spot, e.GetBool("spot", false));
    REEL_ASSIGN_OR_RETURN(n.cost_per_hour, e.GetDouble("cost_per_hour", 0));
    REEL_RETURN_IF_ERROR(LoadCpuset(e, n.name, cores));
    if (e.Has("labels")) {
      REEL_ASSIGN_OR_RETURN(ConfigNode labels, e.Child("labels"));
      for (const std::string& k : labels.Keys()) {
        REEL_ASSIGN_OR_RETURN(n.labels[k], labels.GetString(k));
      }
    }
    nodes->push_back(std::move(n));
  }
  if (nodes->empty()) return list.Error("a cluster needs at least one node");
  return Status::Ok();
}

Status LoadQueues(const ConfigNode& root, std::vector<QueueSpec>* queues) {
  if (!root.Has("queues")) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(ConfigNode list, root.Child("queues"));
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> elements, list.Elements());
  for (const ConfigNode& e : elements) {
    REEL_RETURN_IF_ERROR(e.CheckKeys({"name", "quota", "borrowing_limit", "weight"}));
    QueueSpec q;
    REEL_ASSIGN_OR_RETURN(q.name, e.GetString("name"));
    REEL_ASSIGN_OR_RETURN(ConfigNode quota, e.Child("quota"));
    REEL_ASSIGN_OR_RETURN(q.quota, internal::ReadResources(quota, Resources{0, 0, 0}, true));
    q.borrowing_limit = Resources{0, 0, 0};
    if (e.Has("borrowing_limit")) {
      REEL_ASSIGN_OR_RETURN(ConfigNode limit, e.Child("borrowing_limit"));
      REEL_ASSIGN_OR_RETURN(q.borrowing_limit,
                            internal::ReadResources(limit, Resources{0, 0, 0}, true));
    }
    REEL_ASSIGN_OR_RETURN(q.weight, e.GetDouble("weight", 1));
    queues->push_back(std::move(q));
  }
  return Status::Ok();
}

struct Cluster {
  std::vector<Node> nodes;
  CoreMap cores;  // node -> the machine's cores it pins its workers to (none: not pinned)
  std::vector<QueueSpec> queues;
  std::string executor = "local";  // or "slurm"
  std::string partition;           // slurm: "" = the default partition
};

Status LoadExecutor(const ConfigNode& root, Cluster* c) {
  if (!root.Has("executor")) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(ConfigNode e, root.Child("executor"));
  REEL_RETURN_IF_ERROR(e.CheckKeys({"kind", "partition"}));
  REEL_ASSIGN_OR_RETURN(c->executor, e.GetString("kind", "local"));
  REEL_ASSIGN_OR_RETURN(c->partition, e.GetString("partition", ""));
  if (c->executor != "local" && c->executor != "slurm") {
    return e.Error("executor kind must be local or slurm, got '" + c->executor + "'");
  }
  return Status::Ok();
}

Result<Cluster> LoadCluster(const std::string& file) {
  Cluster c;
  if (file.empty()) {
    c.nodes.push_back(Node{"local", MachineCapacity(), {}, false, 0});
    c.cores["local"] = AllowedCpus();  // this machine: its jobs' workers get cores of their own
    return c;
  }
  REEL_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(file));
  REEL_RETURN_IF_ERROR(root.CheckKeys({"nodes", "queues", "executor"}));
  REEL_RETURN_IF_ERROR(LoadExecutor(root, &c));
  if (root.Has("nodes")) {
    REEL_RETURN_IF_ERROR(LoadNodes(root, &c.nodes, &c.cores));
  } else if (c.executor == "slurm") {
    REEL_ASSIGN_OR_RETURN(c.nodes, internal::SlurmNodes(c.partition));  // as Slurm has them
  } else {
    return root.Error("a local cluster lists its nodes");
  }
  REEL_RETURN_IF_ERROR(LoadQueues(root, &c.queues));
  return c;
}

}  // namespace

struct Daemon::Impl {
  DaemonOptions o;
  Cluster cluster;
  std::unique_ptr<JobStore> store;
  std::unique_ptr<db::Database> lease_db;  // the lease's own connection to the jobs' database
  std::unique_ptr<Lease> lease;
  bool leading = false;  // and so: scheduler and runner are this daemon's, jobs adopted
  bool resync = false;   // a failed write left memory and database apart: adopt again
  std::unique_ptr<Scheduler> scheduler;
  std::shared_ptr<internal::JobRunner> runner;
  Clock* clock = nullptr;

  Clock::TimePoint Now() const { return clock->Now(); }
  std::map<std::string, JobRecord> jobs;
  std::map<std::string, Clock::TimePoint> kill_at;  // stopping jobs' SIGKILL times
  std::set<std::string> swept;                      // ended jobs without scratch
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  std::thread loop;
  std::unique_ptr<http::Server> server;

  std::string JobDir(const std::string& id) const { return o.state_dir + "/jobs/" + id; }
  std::string LogPath(const std::string& id, int worker) const {
    return JobDir(id) + "/worker-" + std::to_string(worker) + ".log";
  }

  Status Save(const JobRecord& job) {
    jobs[job.spec.id] = job;
    return store->Update(job);
  }

  // --- leading ---

  // One round of the lease; starts or stops leading when it changed hands.
  Status Lead() {
    Status stepped = lease->Step();
    if (lease->leading() && (!leading || resync)) {
      REEL_RETURN_IF_ERROR(TakeOver());
    } else if (!lease->leading() && leading) {
      Logger("sched")->warn("no longer leading: {}", StandbyMessage());
      StepDown();
    }
    return stepped;
  }

  // Fresh bookkeeping from the database: the jobs as they are, running ones adopted.
  Status TakeOver() {
    StepDown();
    if (o.runner) {
      runner = o.runner;
    } else if (cluster.executor == "slurm") {
      runner = internal::MakeSlurmJobRunner(o.reel_binary, cluster.partition);
    } else {
      runner = internal::MakeLocalJobRunner(o.reel_binary, cluster.nodes, cluster.cores);
    }
    REEL_ASSIGN_OR_RETURN(scheduler, Scheduler::Make(cluster.nodes, cluster.queues));
    store->SetFence(lease->fence());
    REEL_RETURN_IF_ERROR(Adopt());
    leading = true;
    resync = false;
    Logger("sched")->info("leading (lease epoch {}) with {} jobs", lease->fence().epoch,
                          jobs.size());
    if (o.url_file.empty()) return Status::Ok();
    return WriteFileAtomically(o.url_file, server->url());
  }

  // Running jobs go on under their supervisors; whoever leads next adopts them.
  void StepDown() {
    leading = false;
    jobs.clear();
    kill_at.clear();
    scheduler.reset();
    runner.reset();
  }

  std::string StandbyMessage() const {
    const std::string& leader = lease->leader_url();
    if (leader.empty() || leader == server->url()) {
      return "this scheduler is standing by and none leads yet; try again shortly";
    }
    return "this scheduler is standing by; the leader is at " + leader;
  }

  // --- start-up ---

  // A job recorded as starting when its leader died: its supervisor, if it got that far.
  Status FindStarted(JobRecord& job) {
    if (std::optional<int64_t> handle = runner->Find(job, JobDir(job.spec.id))) {
      job.shim_pid = *handle;
      return store->Update(job);
    }
    job.state = "pending";
    job.nodes.clear();
    job.reason = "its start was interrupted; requeued";
    return store->Update(job);
  }

  Status Adopt() {
    REEL_ASSIGN_OR_RETURN(std::vector<JobRecord> all, store->List());
    for (JobRecord& job : all) {
      const std::string id = job.spec.id;
      if (job.state == "running" && job.shim_pid == 0) REEL_RETURN_IF_ERROR(FindStarted(job));
      if (job.state == "pending") {
        REEL_RETURN_IF_ERROR(scheduler->Submit(job.spec, Now()));
      } else if (job.state == "running" || job.state == "stopping") {
        const auto started =
            Now() - std::chrono::milliseconds(std::max<int64_t>(0, NowUnixMs() - job.started_ms));
        Status adopted = scheduler->Adopt(job.spec, job.nodes, started);
        if (!adopted.ok()) {
          Logger("sched")->warn("job {} cannot be adopted ({}); killing it", id, adopted.message());
          runner->Signal(job, SIGKILL);
          job.state = "failed";
          job.reason = std::string(adopted.message());
          REEL_RETURN_IF_ERROR(store->Update(job));
        } else {
          runner->Adopt(job, JobDir(id));
          if (job.state == "stopping") kill_at[id] = Now() + o.grace;  // asked already
        }
      }
      jobs[id] = job;
    }
    return Status::Ok();
  }

  // --- the tick ---

  void Loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      Status s = Tick();
      if (!s.ok()) Logger("sched")->error("scheduling: {}", s.ToString());
      wake.wait_for(lock, o.tick);
    }
  }

  Status Tick() {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    REEL_RETURN_IF_ERROR(Lead());
    if (!leading) return Status::Ok();
    Status acted = Act();
    if (!acted.ok()) resync = true;
    return acted;
  }

  Status Act() {
    REEL_RETURN_IF_ERROR(CollectExits());
    for (const Decision& d : scheduler->Schedule(Now())) {
      REEL_RETURN_IF_ERROR(Apply(d));
    }
    REEL_RETURN_IF_ERROR(NoteWhyPending());
    SweepScratch();
    return Status::Ok();
  }

  // Ended jobs' scratch folders, once their TTL has passed (logs stay).
  void SweepScratch() {
    const int64_t now = NowUnixMs();
    for (const auto& [id, job] : jobs) {
      if (job.finished_ms == 0 || swept.count(id) != 0) continue;
      if (job.state != "succeeded" && job.state != "failed" && job.state != "cancelled") continue;
      if (job.finished_ms + job.ttl_after_finished.count() > now) continue;
      std::error_code error;
      fs::remove_all(JobDir(id) + "/scratch", error);
      if (!error) swept.insert(id);
    }
  }

  // What the core says a pending job waits for, kept in its record when it changes.
  Status NoteWhyPending() {
    for (auto& [id, job] : jobs) {
      if (job.state != "pending") continue;
      Result<JobView> view = scheduler->Job(id);
      if (!view.ok() || view->reason.empty() || view->reason == job.reason) continue;
      job.reason = view->reason;
      REEL_RETURN_IF_ERROR(store->Update(job));
    }
    return Status::Ok();
  }

  Status CollectExits() {
    std::vector<std::string> running;
    for (const auto& [id, job] : jobs) {
      if (job.state == "running" || job.state == "stopping") running.push_back(id);
    }
    for (const std::string& id : running) {
      JobRecord& job = jobs[id];
      if (std::optional<internal::JobEnd> end = runner->Poll(job, JobDir(id))) {
        REEL_RETURN_IF_ERROR(OnExit(job, end->exit_code, end->signal, end->reason));
      } else if (kill_at.count(id) != 0 && Now() >= kill_at[id]) {
        runner->Signal(job, SIGKILL);
        kill_at.erase(id);
      }
    }
    return Status::Ok();
  }

  static std::string ExitReason(int code, int sig, const std::string& reason) {
    if (!reason.empty()) return reason;
    if (sig != 0) return "killed by signal " + std::to_string(sig);
    return "exit " + std::to_string(code);
  }

  Status OnExit(JobRecord& job, int code, int sig, const std::string& reason) {
    const std::string id = job.spec.id;
    const auto now = Now();
    kill_at.erase(id);
    job.exit_code = code;
    job.shim_pid = 0;
    job.nodes.clear();
    const std::string stop = job.stop;
    // A job that exits 0 while being preempted or resized had finished its work: it succeeded
    // and must not run again.
    const bool completed = code == 0 && sig == 0 && (stop == "preempt" || stop == "resize");
    const bool asked = job.state == "stopping" && !completed;
    job.stop.clear();
    // A job adopted while stopping is "running" to the core, which did not see the request.
    const bool core_stopping = scheduler->Job(id).value().phase == JobPhase::kStopping;
    const bool requeue = (asked && stop == "preempt") || (!asked && code == kExitPreempted);
    if (asked && core_stopping && (stop == "preempt" || stop == "resize")) {
      REEL_ASSIGN_OR_RETURN(std::optional<Decision> restart, scheduler->Stopped(id, now));
      job.preemptions += stop == "preempt" ? 1 : 0;
      job.state = "pending";
      REEL_RETURN_IF_ERROR(Save(job));
      return restart ? Apply(*restart) : Status::Ok();
    }
    REEL_RETURN_IF_ERROR(core_stopping && !completed ? scheduler->Stopped(id, now).status()
                                                     : scheduler->Finished(id, now));
    job.cost = scheduler->Job(id).value().cost;
    job.finished_ms = NowUnixMs();
    if (requeue || (asked && stop == "resize")) {
      // Stopped at a checkpoint (asked by us before a restart, or by someone else): run it again.
      REEL_RETURN_IF_ERROR(scheduler->Requeue(id));
      ++job.preemptions;
      job.state = "pending";
      if (!asked) job.reason = "stopped at a checkpoint (exit 75); requeued";
      return Save(job);
    }
    if (asked) {
      job.state = stop == "cancel" ? "cancelled" : "failed";
    } else {
      job.state = code == 0 ? "succeeded" : "failed";
      job.reason = code == 0 ? "" : ExitReason(code, sig, reason);
    }
    return Save(job);
  }

  Status Apply(const Decision& d) {
    JobRecord& job = jobs[d.job];
    switch (d.kind) {
      case Decision::Kind::kStart:
        return Launch(job, d.nodes);
      case Decision::Kind::kPreempt:
      case Decision::Kind::kResize:
      case Decision::Kind::kStop: {
        runner->Signal(job, SIGTERM);
        kill_at[d.job] = Now() + o.grace;
        job.state = "stopping";
        if (job.stop != "cancel") {
          job.stop = d.kind == Decision::Kind::kPreempt  ? "preempt"
                     : d.kind == Decision::Kind::kResize ? "resize"
                                                         : "stop";
        }
        job.reason = d.reason;
        return Save(job);
      }
    }
    return Status::Ok();
  }

  Status Launch(JobRecord& job, const std::vector<std::string>& nodes) {
    const std::string dir = JobDir(job.spec.id);
    std::error_code error;
    fs::create_directories(dir, error);
    ++job.attempts;
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::ofstream(LogPath(job.spec.id, static_cast<int>(i)), std::ios::app)
          << "=== reel scheduler: " << job.spec.id << " attempt " << job.attempts << " on "
          << nodes[i] << " ===\n";
    }
    job.nodes = nodes;
    job.started_ms = NowUnixMs();
    job.stop.clear();
    job.state = "running";
    job.shim_pid = 0;
    job.reason.clear();
    // Recorded before it starts: a daemon that no longer leads fails here (the fence), and one
    // that dies past here leaves a record the next leader checks (FindStarted).
    REEL_RETURN_IF_ERROR(Save(job));
    Result<int64_t> handle = runner->Start(job, nodes, dir);
    if (!handle.ok()) {
      // Never started: its room is given back and it ends failed with the reason.
      REEL_RETURN_IF_ERROR(scheduler->Finished(job.spec.id, Now()));
      job.state = "failed";
      job.reason = std::string(handle.status().message());
      job.nodes.clear();
      return Save(job);
    }
    job.shim_pid = *handle;
    return Save(job);
  }

  // --- the API ---

  Result<Response> Submit(const Request& r) {
    REEL_ASSIGN_OR_RETURN(json body, ParseJson(r.body, "the job"));
    REEL_ASSIGN_OR_RETURN(JobRecord job, JobFromJson(body));
    job.spec.id = "job-new";
    REEL_RETURN_IF_ERROR(scheduler->Validate(job.spec));
    job.submitted_ms = NowUnixMs();
    REEL_RETURN_IF_ERROR(store->Add(&job).status());
    REEL_RETURN_IF_ERROR(scheduler->Submit(job.spec, Now()));
    jobs[job.spec.id] = job;
    wake.notify_all();
    return Response::Json(201, JobToJson(job));
  }

  Result<Response> List(const Request& r) {
    json out = json::array();
    const auto state = r.query.find("state");
    for (const auto& [id, job] : Ordered()) {
      if (state == r.query.end() || job->state == state->second) out.push_back(JobToJson(*job));
    }
    return Response::Json(200, out);
  }

  std::vector<std::pair<int64_t, const JobRecord*>> Ordered() const {
    std::vector<std::pair<int64_t, const JobRecord*>> out;
    for (const auto& [id, job] : jobs) out.emplace_back(std::stoll(id.substr(4)), &job);
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<JobRecord*> Find(const Request& r) {
    const auto it = jobs.find(r.params.at("id"));
    if (it == jobs.end()) return NotFoundError("no job '" + r.params.at("id") + "' (reel jobs ls)");
    return &it->second;
  }

  Result<Response> Cancel(const Request& r) {
    REEL_ASSIGN_OR_RETURN(JobRecord * job, Find(r));
    if (job->state != "pending" && job->state != "running") {
      return FailedPreconditionError("job " + job->spec.id + " is " + job->state);
    }
    REEL_ASSIGN_OR_RETURN(std::optional<Decision> stop, scheduler->Cancel(job->spec.id, Now()));
    if (stop) {
      job->stop = "cancel";
      REEL_RETURN_IF_ERROR(Apply(*stop));
    } else {
      job->state = "cancelled";
      job->reason = "cancelled";
      job->finished_ms = NowUnixMs();
      REEL_RETURN_IF_ERROR(Save(*job));
    }
    return Response::Json(200, JobToJson(*job));
  }

  Result<Response> Logs(const Request& r) {
    REEL_ASSIGN_OR_RETURN(JobRecord * job, Find(r));
    int worker = 0;
    if (r.query.count("worker") != 0) worker = std::atoi(r.query.at("worker").c_str());
    if (worker < 0 || worker >= job->spec.max_workers) {
      return InvalidArgumentError("job " + job->spec.id + " has no worker " +
                                  std::to_string(worker));
    }
    Result<std::string> text = ReadFileToString(LogPath(job->spec.id, worker), "log");
    return Response::Text(200, text.ok() ? *text : "");
  }

  Result<Response> NodesJson() {
    json out = json::array();
    for (const Scheduler::NodeView& n : scheduler->Nodes()) {
      out.push_back({{"name", n.spec.name},
                     {"cpu", FormatCpu(n.spec.capacity.cpu_millis)},
                     {"memory", FormatMemory(n.spec.capacity.memory_bytes)},
                     {"gpu", n.spec.capacity.gpu},
                     {"free",
                      {{"cpu", FormatCpu(n.free.cpu_millis)},
                       {"memory", FormatMemory(n.free.memory_bytes)},
                       {"gpu", n.free.gpu}}},
                     {"spot", n.spec.spot},
                     {"cost_per_hour", n.spec.cost_per_hour},
                     {"labels", n.spec.labels},
                     {"reclaimed", n.cordoned}});
    }
    return Response::Json(200, out);
  }

  Result<Response> QueuesJson() {
    json out = json::array();
    for (const QueueSpec& q : scheduler->Queues()) {
      REEL_ASSIGN_OR_RETURN(Resources used, scheduler->QueueUsage(q.name));
      out.push_back({{"name", q.name},
                     {"quota", ResourcesText(q.quota)},
                     {"borrowing_limit", ResourcesText(q.borrowing_limit)},
                     {"weight", q.weight},
                     {"used", ResourcesText(used)}});
    }
    return Response::Json(200, out);
  }

  Result<Response> Reclaim(const Request& r, bool reclaim) {
    const std::string node = r.params.at("name");
    if (!reclaim) {
      REEL_RETURN_IF_ERROR(scheduler->Restore(node));
      return Response::Json(200, {{"node", node}, {"reclaimed", false}});
    }
    REEL_ASSIGN_OR_RETURN(std::vector<Decision> decisions, scheduler->Reclaim(node, Now()));
    json preempted = json::array();
    for (const Decision& d : decisions) {
      REEL_RETURN_IF_ERROR(Apply(d));
      preempted.push_back(d.job);
    }
    return Response::Json(200, {{"node", node}, {"reclaimed", true}, {"preempted", preempted}});
  }

  // A handler under the mutex, its errors as the API's error answers; a standby's answer is 503.
  http::Handler Locked(std::function<Result<Response>(const Request&)> fn) {
    return [this, fn = std::move(fn)](const Request& r) {
      std::lock_guard<std::mutex> lock(mu);
      if (!leading) return Response::Error(UnavailableError(StandbyMessage()));
      Result<Response> response = fn(r);
      return response.ok() ? *response : Response::Error(response.status());
    };
  }

  Result<http::Router> Routes() {
    http::Router router;
    REEL_RETURN_IF_ERROR(router.Add("GET", "/healthz", [this](const Request&) {
      std::lock_guard<std::mutex> lock(mu);
      return Response::Json(200, {{"ok", true},
                                  {"role", leading ? "leader" : "standby"},
                                  {"leader", lease->leader_url()}});
    }));
    REEL_RETURN_IF_ERROR(
        router.Add("POST", "/v1/jobs", Locked([this](const Request& r) { return Submit(r); })));
    REEL_RETURN_IF_ERROR(
        router.Add("GET", "/v1/jobs", Locked([this](const Request& r) { return List(r); })));
    REEL_RETURN_IF_ERROR(
        router.Add("GET", "/v1/jobs/{id}", Locked([this](const Request& r) -> Result<Response> {
                     REEL_ASSIGN_OR_RETURN(JobRecord * job, Find(r));
                     return Response::Json(200, JobToJson(*job));
                   })));
    REEL_RETURN_IF_ERROR(router.Add("POST", "/v1/jobs/{id}/cancel",
                                    Locked([this](const Request& r) { return Cancel(r); })));
    REEL_RETURN_IF_ERROR(router.Add("GET", "/v1/jobs/{id}/logs",
                                    Locked([this](const Request& r) { return Logs(r); })));
    REEL_RETURN_IF_ERROR(
        router.Add("GET", "/v1/nodes", Locked([this](const Request&) { return NodesJson(); })));
    REEL_RETURN_IF_ERROR(
        router.Add("GET", "/v1/queues", Locked([this](const Request&) { return QueuesJson(); })));
    REEL_RETURN_IF_ERROR(router.Add("POST", "/v1/nodes/{name}/reclaim",
                                    Locked([this](const Request& r) { return Reclaim(r, true); })));
    REEL_RETURN_IF_ERROR(
        router.Add("POST", "/v1/nodes/{name}/restore",
                   Locked([this](const Request& r) { return Reclaim(r, false); })));
    return router;
  }
};

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() { Shutdown(); }

Result<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->o = options;
  REEL_ASSIGN_OR_RETURN(impl->cluster, LoadCluster(options.cluster_file));
  REEL_RETURN_IF_ERROR(Scheduler::Make(impl->cluster.nodes, impl->cluster.queues).status());
  impl->clock = options.clock != nullptr ? options.clock : Clock::System();
  REEL_ASSIGN_OR_RETURN(impl->store, JobStore::Open(options.state_dir, options.database));
  REEL_ASSIGN_OR_RETURN(impl->lease_db,
                        db::Open(JobStore::DatabaseUri(options.state_dir, options.database)));
  REEL_ASSIGN_OR_RETURN(http::Router router, impl->Routes());
  http::ServerOptions server;
  server.host = options.host;
  server.port = options.port;
  REEL_ASSIGN_OR_RETURN(impl->server, http::Server::Start(server, std::move(router)));
  impl->lease = std::make_unique<Lease>(
      impl->lease_db.get(),
      LeaseOptions{"scheduler", options.identity, impl->server->url(), options.lease, impl->clock});
  {
    // Leads at once when no other daemon does, having adopted its jobs before Start returns.
    std::lock_guard<std::mutex> lock(impl->mu);
    REEL_RETURN_IF_ERROR(impl->Lead());
  }
  Impl* raw = impl.get();
  if (options.tick_thread) impl->loop = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Status Daemon::Tick() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->Tick();
}

std::string Daemon::url() const { return impl_->server ? impl_->server->url() : ""; }

bool Daemon::leading() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->leading;
}

void Daemon::Shutdown() {
  if (!impl_ || !impl_->server) return;
  impl_->server->Shutdown();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    if (Status released = impl_->lease->Release(); !released.ok()) {
      Logger("sched")->warn("giving up the lease: {}", released.message());
    }
    impl_->StepDown();
  }
  impl_->wake.notify_all();
  if (impl_->loop.joinable()) impl_->loop.join();
  impl_->server.reset();
}

}  // namespace reel::sched
