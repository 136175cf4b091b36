// Pipeline tasks as jobs of the scheduler daemon, through its HTTP API.
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "http/client.h"
#include "sched/executor.h"
#include "sched/jobs.h"

namespace reel::sched {
namespace {

using nlohmann::json;

class SchedulerExecutor : public Executor {
 public:
  explicit SchedulerExecutor(std::string url) : url_(std::move(url)) {}

  // One keep-alive connection for every call (Wait polls several times a second), made on first
  // use.
  Result<http::Client*> Connection() {
    if (!client_) {
      REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(url_));
      client_ = std::make_unique<http::Client>(std::move(client));
    }
    return client_.get();
  }

  Result<int64_t> Start(const Launch& launch) override {
    json env = json::object();
    for (const std::string& e : launch.env) {
      const size_t eq = e.find('=');
      if (eq != std::string::npos && eq > 0) env[e.substr(0, eq)] = e.substr(eq + 1);
    }
    json body = {{"name", launch.task},
                 {"command", launch.argv},
                 {"env", env},
                 {"workdir", launch.workdir},
                 {"resources", ResourcesToJson(launch.resources)}};
    REEL_ASSIGN_OR_RETURN(http::Client * client, Connection());
    REEL_ASSIGN_OR_RETURN(json job, client->JsonCall("POST", "/v1/jobs", &body));
    const std::string id = job.value("id", "");
    const int64_t handle = next_++;
    jobs_[handle] = Job{id, launch.log_path};
    return handle;
  }

  void Terminate(int64_t id, std::chrono::milliseconds grace) override {
    (void)grace;  // the scheduler's own grace applies
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    Result<http::Client*> client = Connection();
    if (client.ok()) {  // a job that ended meanwhile answers an error: nothing to stop then
      (void)(*client)->JsonCall("POST", "/v1/jobs/" + it->second.id + "/cancel", nullptr);
    }
  }

  std::optional<Exit> Wait(Clock::TimePoint deadline) override {
    while (true) {
      for (auto& [handle, job] : jobs_) {
        std::optional<Exit> exit = Ended(handle, job);
        if (!exit) continue;
        jobs_.erase(handle);
        return exit;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_until(
          std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200)));
    }
  }

  size_t running() const override { return jobs_.size(); }

 private:
  struct Job {
    std::string id, log;
  };

  // The job's end, with its output appended to the task's log; nullopt while it runs or the
  // scheduler cannot be asked (the next look asks again).
  std::optional<Exit> Ended(int64_t handle, const Job& job) {
    Result<http::Client*> connection = Connection();
    if (!connection.ok()) return std::nullopt;
    http::Client* client = *connection;
    Result<json> j = client->JsonCall("GET", "/v1/jobs/" + job.id, nullptr);
    if (!j.ok() || !j->is_object()) return std::nullopt;
    const std::string state = j->value("state", "");
    if (state != "succeeded" && state != "failed" && state != "cancelled") return std::nullopt;
    Result<http::Response> log = client->Get("/v1/jobs/" + job.id + "/logs");
    std::ofstream out(job.log, std::ios::app);
    const std::string reason = j->value("reason", "");
    out << "(scheduler job " << job.id << ": " << state << (reason.empty() ? "" : ": " + reason)
        << ")\n";
    if (log.ok() && log->status == 200) out << log->body;
    Exit exit;
    exit.id = handle;
    if (state == "cancelled") {
      exit.exit_code = -1;
      exit.signal = 15;
    } else {
      const json code = j->value("exit_code", json());
      exit.exit_code = state == "succeeded" ? 0 : (code.is_number_integer() ? code.get<int>() : 1);
      if (exit.exit_code == 0 && state != "succeeded") exit.exit_code = 1;
      if (exit.exit_code < 0) exit.signal = 9;  // killed: over its memory or its time limit
    }
    return exit;
  }

  std::string url_;
  std::unique_ptr<http::Client> client_;
  std::map<int64_t, Job> jobs_;
  int64_t next_ = 1;
};

}  // namespace

std::unique_ptr<Executor> MakeSchedulerExecutor(std::string url) {
  return std::make_unique<SchedulerExecutor>(std::move(url));
}

}  // namespace reel::sched
