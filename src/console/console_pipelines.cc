// /ui/api/pipelines... (the runs `reel pipeline run` records) and /ui/api/jobs... (the scheduler
// daemon's jobs, queues and nodes, passed through).
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "base/subprocess.h"
#include "console/console_internal.h"
#include "http/client.h"
#include "sched/pipeline.h"

namespace reel::console {
namespace {

using http::Request;
using http::Response;
using registry::Role;

constexpr std::streamoff kLogTail = 256 << 10;

nlohmann::json RunJson(const sched::RunRecord& run) {
  return {{"id", run.id},
          {"pipeline", run.pipeline},
          {"state", std::string(sched::RunStateName(run.state))},
          {"created_ms", run.created_ms},
          {"finished_ms", run.finished_ms},
          {"failed_task", run.failed_task}};
}

// Each task's dependencies, from the pipeline file the run kept.
std::map<std::string, std::vector<std::string>> Dependencies(const sched::RunRecord& run) {
  std::map<std::string, std::vector<std::string>> out;
  Result<sched::Pipeline> p = sched::ParsePipeline(run.source, run.source_name, run.inputs);
  if (!p.ok()) return out;  // a file this version cannot read: tasks without edges
  for (const sched::Task& t : p->tasks) out[t.name] = t.depends_on;
  return out;
}

nlohmann::json TaskJson(const sched::TaskRecord& t, const std::vector<std::string>& depends_on) {
  const bool timed = t.started_ms > 0 && t.finished_ms >= t.started_ms;
  return {{"name", t.name},
          {"state", std::string(sched::TaskStateName(t.state))},
          {"attempts", t.attempts},
          {"exit_code", t.exit_code ? nlohmann::json(*t.exit_code) : nlohmann::json()},
          {"reason", t.reason},
          {"cached_from", t.cached_from},
          {"started_ms", t.started_ms},
          {"finished_ms", t.finished_ms},
          {"duration_s",
           timed ? nlohmann::json((t.finished_ms - t.started_ms) / 1000.0) : nlohmann::json()},
          {"depends_on", depends_on},
          {"outputs", t.outputs}};
}

Result<Response> ListPipelineRuns(sched::RunStore& store) {
  REEL_ASSIGN_OR_RETURN(auto runs, store.ListRuns(200));
  nlohmann::json out = nlohmann::json::array();
  for (const sched::RunRecord& run : runs) {
    REEL_ASSIGN_OR_RETURN(auto tasks, store.GetTasks(run.id));
    nlohmann::json j = RunJson(run);
    j["tasks"] = tasks.size();
    j["done"] = std::count_if(tasks.begin(), tasks.end(),
                              [](const sched::TaskRecord& t) { return sched::IsDone(t.state); });
    out.push_back(std::move(j));
  }
  return Response::Json(200, {{"runs", std::move(out)}});
}

Result<Response> ShowPipelineRun(sched::RunStore& store, const std::string& id) {
  REEL_ASSIGN_OR_RETURN(sched::RunRecord run, store.GetRun(id));
  REEL_ASSIGN_OR_RETURN(auto tasks, store.GetTasks(id));
  const auto deps = Dependencies(run);
  nlohmann::json list = nlohmann::json::array();
  for (const sched::TaskRecord& t : tasks) {
    auto it = deps.find(t.name);
    list.push_back(TaskJson(t, it == deps.end() ? std::vector<std::string>{} : it->second));
  }
  nlohmann::json j = RunJson(run);
  j["tasks"] = std::move(list);
  return Response::Json(200, j);
}

Result<Response> TaskLog(sched::RunStore& store, const std::string& id, const std::string& task) {
  REEL_ASSIGN_OR_RETURN(auto tasks, store.GetTasks(id));  // NotFound for an unknown run
  if (std::none_of(tasks.begin(), tasks.end(), [&](const auto& t) { return t.name == task; })) {
    return NotFoundError("run " + id + " has no task " + task);
  }
  std::ifstream in(store.LogPath(id, task), std::ios::binary | std::ios::ate);
  if (!in) return Response::Text(200, "");  // not started yet
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kLogTail));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Response::Text(200, std::move(text));
}

// `reel pipeline retry RUN` in the background, as a person would type it; reaped when it ends.
Result<Response> Retry(Console::State* st, sched::RunStore& store, const std::string& id) {
  REEL_ASSIGN_OR_RETURN(sched::RunRecord run, store.GetRun(id));
  if (run.state == sched::RunState::kRunning || run.state == sched::RunState::kSucceeded) {
    return FailedPreconditionError("run " + id + " is " +
                                   std::string(sched::RunStateName(run.state)) +
                                   ": only a failed or interrupted run is retried");
  }
  std::string program = st->options.program;
  if (program.empty()) {
    REEL_ASSIGN_OR_RETURN(program, ThisProgram());
  }
  SpawnOptions options;
  options.die_with_parent = false;  // a retry outlives the console
  options.workdir = run.workdir;
  REEL_ASSIGN_OR_RETURN(
      pid_t pid, SpawnProcess({program, "pipeline", "--state", store.state_dir(), "retry", id},
                              CurrentEnvironment(), options));
  std::thread([pid] { ::waitpid(pid, nullptr, 0); }).detach();
  return Response::Json(200, {{"started", true}, {"pid", pid}});
}

Result<Response> Cancel(sched::RunStore& store, const std::string& id) {
  REEL_ASSIGN_OR_RETURN(sched::RunRecord run, store.GetRun(id));
  if (run.state != sched::RunState::kRunning || run.runner_pid <= 0) {
    return FailedPreconditionError("run " + id + " is " +
                                   std::string(sched::RunStateName(run.state)) + ", not running");
  }
  // The runner stops its tasks on SIGTERM, as on Ctrl-C; the run then reads as interrupted.
  if (::kill(static_cast<pid_t>(run.runner_pid), SIGTERM) != 0) {
    return ErrnoToStatus(errno, "signalling the runner of " + id);
  }
  return Response::Json(200, {{"cancelled", true}});
}

// --- the scheduler daemon ---------------------------------------------------------------------

Result<http::Client> SchedulerClient(const Console::State& st) {
  if (st.options.scheduler.empty()) {
    return NotFoundError("no scheduler is configured (--scheduler URL)");
  }
  http::ClientOptions options;
  options.timeout = std::chrono::seconds(10);
  return http::Client::Make(st.options.scheduler, options);
}

Result<Response> Jobs(const Console::State& st) {
  REEL_ASSIGN_OR_RETURN(http::Client client, SchedulerClient(st));
  nlohmann::json out = nlohmann::json::object();
  for (const char* what : {"jobs", "queues", "nodes"}) {
    REEL_ASSIGN_OR_RETURN(out[what], client.JsonCall("GET", std::string("/v1/") + what, nullptr));
  }
  return Response::Json(200, out);
}

Result<Response> CancelJob(const Console::State& st, const std::string& id) {
  REEL_ASSIGN_OR_RETURN(http::Client client, SchedulerClient(st));
  const nlohmann::json empty = nlohmann::json::object();
  REEL_ASSIGN_OR_RETURN(nlohmann::json answer,
                        client.JsonCall("POST", "/v1/jobs/" + id + "/cancel", &empty));
  return Response::Json(200, answer);
}

}  // namespace

Status AddPipelineRoutes(Console::State* st, http::Router* router) {
  const auto add = [&](const char* method, const char* path, Role role, auto fn) {
    return router->Add(method, path, st->Api(role, [st, fn](const Caller&, const Request& r) {
      return st->WithPipelines([&](sched::RunStore& s) { return fn(s, r); });
    }));
  };
  REEL_RETURN_IF_ERROR(add("GET", "/ui/api/pipelines", Role::kReader,
                           [](sched::RunStore& s, const Request&) { return ListPipelineRuns(s); }));
  REEL_RETURN_IF_ERROR(add(
      "GET", "/ui/api/pipelines/{run}", Role::kReader,
      [](sched::RunStore& s, const Request& r) { return ShowPipelineRun(s, r.params.at("run")); }));
  REEL_RETURN_IF_ERROR(add("GET", "/ui/api/pipelines/{run}/logs/{task}", Role::kReader,
                           [](sched::RunStore& s, const Request& r) {
                             return TaskLog(s, r.params.at("run"), r.params.at("task"));
                           }));
  REEL_RETURN_IF_ERROR(
      add("POST", "/ui/api/pipelines/{run}/retry", Role::kWriter,
          [st](sched::RunStore& s, const Request& r) { return Retry(st, s, r.params.at("run")); }));
  REEL_RETURN_IF_ERROR(
      add("POST", "/ui/api/pipelines/{run}/cancel", Role::kWriter,
          [](sched::RunStore& s, const Request& r) { return Cancel(s, r.params.at("run")); }));
  REEL_RETURN_IF_ERROR(router->Add(
      "GET", "/ui/api/jobs",
      st->Api(Role::kReader, [st](const Caller&, const Request&) { return Jobs(*st); })));
  return router->Add("POST", "/ui/api/jobs/{id}/cancel",
                     st->Api(Role::kWriter, [st](const Caller&, const Request& r) {
                       return CancelJob(*st, r.params.at("id"));
                     }));
}

}  // namespace reel::console
