// Scheduler daemons sharing one database, on a fake clock and a fake engine: which one acts,
// what a takeover adopts, and a start its daemon died in the middle of.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>

#include "base/clock.h"
#include "http/client.h"
#include "sched/daemon.h"
#include "sched/job_runner.h"
#include "sched/jobs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::sched {
namespace {

// What the engine really ran, seen by every daemon's runner (as processes are by any daemon
// on the machine).
struct World {
  std::map<std::string, int> starts;
  std::set<std::string> running, ended;
};

class WorldRunner : public internal::JobRunner {
 public:
  explicit WorldRunner(World* world) : world_(world) {}
  Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) override {
    (void)nodes;
    (void)dir;
    ++world_->starts[job.spec.id];
    world_->running.insert(job.spec.id);
    return int64_t{100} + std::stoll(job.spec.id.substr(4));
  }
  void Signal(const JobRecord& job, int signal) override {
    (void)job;
    (void)signal;
  }
  std::optional<internal::JobEnd> Poll(const JobRecord& job, const std::string& dir) override {
    (void)dir;
    if (world_->ended.count(job.spec.id) == 0) return std::nullopt;
    world_->running.erase(job.spec.id);
    return internal::JobEnd{};
  }
  std::optional<int64_t> Find(const JobRecord& job, const std::string& dir) override {
    (void)dir;
    if (world_->running.count(job.spec.id) == 0) return std::nullopt;
    return int64_t{100} + std::stoll(job.spec.id.substr(4));
  }

 private:
  World* world_;
};

class DaemonHaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/cluster.yaml") << "nodes:\n  - {name: n1, cpu: 2, memory: 2Gi}\n";
  }

  std::unique_ptr<Daemon> Start(const std::string& identity) {
    DaemonOptions o;
    o.state_dir = dir_.path() + "/state";
    o.cluster_file = dir_.path() + "/cluster.yaml";
    o.port = 0;
    o.clock = &clock_;
    o.runner = std::make_shared<WorldRunner>(&world_);
    o.tick_thread = false;
    o.identity = identity;
    o.lease = std::chrono::seconds(5);
    Result<std::unique_ptr<Daemon>> d = Daemon::Start(o);
    REEL_CHECK(d.ok()) << d.status().ToString();
    return std::move(*d);
  }

  static Result<nlohmann::json> Call(Daemon& d, std::string_view method, const std::string& target,
                                     const nlohmann::json* body = nullptr) {
    REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(d.url()));
    return client.JsonCall(method, target, body);
  }

  std::string Submit(Daemon& d) {
    const nlohmann::json job = {{"command", {"true"}}, {"resources", {{"cpu", "1"}}}};
    Result<nlohmann::json> made = Call(d, "POST", "/v1/jobs", &job);
    REEL_CHECK(made.ok()) << made.status().ToString();
    return (*made)["id"].get<std::string>();
  }

  std::string State(Daemon& d, const std::string& id) {
    Result<nlohmann::json> job = Call(d, "GET", "/v1/jobs/" + id);
    return job.ok() ? (*job)["state"].get<std::string>() : job.status().ToString();
  }

  testing::TempDir dir_;
  FakeClock clock_;
  World world_;
};

TEST_F(DaemonHaTest, OnlyTheLeaderActsAndAStandbyAdoptsItsJobsWhenItFallsSilent) {
  std::unique_ptr<Daemon> a = Start("a"), b = Start("b");
  ASSERT_TRUE(a->leading());
  ASSERT_FALSE(b->leading());
  Result<nlohmann::json> refused = Call(*b, "GET", "/v1/jobs");
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("the leader is at " + a->url()), std::string::npos)
      << refused.status().ToString();

  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit(*a));
  ASSERT_OK(a->Tick());
  ASSERT_OK(b->Tick());
  EXPECT_EQ(world_.running.size(), 2u) << "two fit on 2 CPUs";

  // a falls silent (as after kill -9: it neither renews nor gives the lease up); a job ends.
  world_.ended.insert(ids[0]);
  clock_.Advance(std::chrono::milliseconds(4999));
  ASSERT_OK(b->Tick());
  EXPECT_FALSE(b->leading()) << "taken over before the lease ran out";
  clock_.Advance(std::chrono::milliseconds(1));
  ASSERT_OK(b->Tick());
  ASSERT_TRUE(b->leading());
  ASSERT_OK(b->Tick());  // the job that waited now fits
  EXPECT_EQ(State(*b, ids[0]), "succeeded");
  EXPECT_EQ(State(*b, ids[1]), "running");
  EXPECT_EQ(State(*b, ids[2]), "running");

  // a, back, finds it no longer leads, and starts nothing.
  const std::string extra = Submit(*b);
  ASSERT_OK(a->Tick());
  EXPECT_FALSE(a->leading());
  for (const std::string& id : ids) EXPECT_EQ(world_.starts[id], 1) << id << " started twice";
  EXPECT_EQ(world_.starts.count(extra), 0u);
  EXPECT_EQ(State(*a, ids[1]).find("Unavailable"), 0u);
}

// The leader records a start before it happens; if it dies in between, the next one asks the
// engine whether the job got going.
TEST_F(DaemonHaTest, AStartInterruptedByTheLeadersDeathIsFoundOrRedone) {
  {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(dir_.path() + "/state");
    ASSERT_OK(store.status());
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK_AND_ASSIGN(JobRecord job,
                           JobFromJson({{"command", {"true"}}, {"resources", {{"cpu", "1"}}}}));
      ASSERT_OK((*store)->Add(&job).status());
      job.state = "running";
      job.nodes = {"n1"};
      job.attempts = 1;
      ASSERT_OK((*store)->Update(job));  // shim_pid 0: its start was not confirmed
    }
  }
  world_.running.insert("job-1");  // job-1 got going; job-2 did not
  world_.starts["job-1"] = 1;
  std::unique_ptr<Daemon> d = Start("c");
  ASSERT_TRUE(d->leading());
  ASSERT_OK(d->Tick());
  EXPECT_EQ(world_.starts["job-1"], 1) << "a running job was started again";
  EXPECT_EQ(world_.starts["job-2"], 1) << "a job that never started was lost";
  EXPECT_EQ(State(*d, "job-1"), "running");
  EXPECT_EQ(State(*d, "job-2"), "running");
}

}  // namespace
}  // namespace reel::sched
