#include "sched/jobs.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::sched {
namespace {

using nlohmann::json;

TEST(JobsTest, ReadsASubmittedJobWithDefaults) {
  ASSERT_OK_AND_ASSIGN(JobRecord job, JobFromJson(json{{"command", {"reel", "train"}}}));
  EXPECT_EQ(job.name, "reel");
  EXPECT_EQ(job.spec.queue, "default");
  EXPECT_EQ(job.spec.min_workers, 1);
  EXPECT_EQ(job.spec.max_workers, 1);
  EXPECT_EQ(job.spec.per_worker.cpu_millis, 1000);
  EXPECT_FALSE(job.spec.time_limit);
  const json full = {{"name", "t"},
                     {"command", {"sleep", "1"}},
                     {"workers", 2},
                     {"max_workers", 4},
                     {"resources", {{"cpu", 2}, {"memory", "4Gi"}, {"gpu", 1}}},
                     {"queue", "team"},
                     {"priority", 7},
                     {"spot", true},
                     {"time_limit", "1h30m"},
                     {"node_selector", {{"zone", "a"}}},
                     {"env", {{"A", "1"}}},
                     {"workdir", "/tmp"}};
  ASSERT_OK_AND_ASSIGN(job, JobFromJson(full));
  EXPECT_EQ(job.spec.per_worker.cpu_millis, 2000);
  EXPECT_EQ(job.spec.per_worker.memory_bytes, int64_t{4} << 30);
  EXPECT_EQ(job.spec.per_worker.gpu, 1);
  EXPECT_EQ(job.spec.max_workers, 4);
  EXPECT_EQ(job.spec.time_limit, std::chrono::milliseconds(90 * 60000));
  EXPECT_TRUE(job.spec.spot_ok);
  EXPECT_EQ(job.spec.node_selector.at("zone"), "a");
  // The API's form reads back as the same job.
  ASSERT_OK_AND_ASSIGN(
      JobRecord again, JobFromJson([&] {
        json j = JobToJson(job);
        for (const char* k :
             {"id", "state", "attempts", "preemptions", "cost", "reason", "nodes", "shim_pid",
              "stop", "submitted_ms", "started_ms", "finished_ms", "exit_code"}) {
          j.erase(k);
        }
        return j;
      }()));
  EXPECT_EQ(JobToJson(again), JobToJson(job));
}

TEST(JobsTest, BadJobsNameTheField) {
  const auto message = [](const json& j) {
    Result<JobRecord> r = JobFromJson(j);
    EXPECT_STATUS(r, StatusCode::kInvalidArgument);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_EQ(message(json{{"command", json::array()}}),
            "job field 'command': expected a non-empty list");
  EXPECT_EQ(message(json{{"command", {"x"}}, {"wrokers", 2}}), "job field 'wrokers': unknown key");
  EXPECT_EQ(message(json{{"command", {"x"}}, {"workers", 0}}),
            "job field 'workers': 0 is outside [1, 100000]");
  EXPECT_EQ(message(json{{"command", {"x"}}, {"workers", 3}, {"max_workers", 2}}),
            "job field 'max_workers': 2 is outside [3, 100000]");
  EXPECT_NE(message(json{{"command", {"x"}}, {"resources", {{"memory", "4GB"}}}})
                .find("job field 'resources.memory': memory '4GB'"),
            std::string::npos);
  EXPECT_EQ(message(json{{"command", {"x"}}, {"resources", {{"gpus", 1}}}}),
            "job field 'resources.gpus': unknown key");
  EXPECT_NE(message(json{{"command", {"x"}}, {"time_limit", "soon"}}).find("time_limit"),
            std::string::npos);
  EXPECT_EQ(message(json{{"command", {"x"}}, {"env", {{"A", 1}}}}),
            "job field 'env.A': expected a string");
  EXPECT_EQ(message(json::array()), "a job is a JSON object");
}

TEST(JobsTest, TheStoreKeepsJobsAcrossOpens) {
  testing::TempDir dir;
  std::string id;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> store, JobStore::Open(dir.path()));
    ASSERT_OK_AND_ASSIGN(JobRecord job, JobFromJson(json{{"command", {"true"}}, {"priority", 3}}));
    job.submitted_ms = 5;
    ASSERT_OK_AND_ASSIGN(id, store->Add(&job));
    EXPECT_EQ(id, "job-1");
    job.state = "running";
    job.nodes = {"a", "b"};
    job.shim_pid = 1234;
    job.attempts = 1;
    job.exit_code = 3;
    ASSERT_OK(store->Update(job));
    JobRecord second = job;
    ASSERT_OK_AND_ASSIGN(std::string id2, store->Add(&second));
    EXPECT_EQ(id2, "job-2");
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> store, JobStore::Open(dir.path()));
  ASSERT_OK_AND_ASSIGN(JobRecord job, store->Get(id));
  EXPECT_EQ(job.state, "running");
  EXPECT_EQ(job.nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(job.shim_pid, 1234);
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_EQ(job.spec.priority, 3);
  EXPECT_EQ(job.submitted_ms, 5);
  ASSERT_OK_AND_ASSIGN(std::vector<JobRecord> running, store->List({"running"}));
  EXPECT_EQ(running.size(), 1u);
  EXPECT_STATUS(store->Get("job-9"), StatusCode::kNotFound);
}

TEST(JobsTest, AnAdoptedJobHoldsItsNodesAndARequeuedOneGoesBackInLine) {
  Node n{"n", Resources{4000, int64_t{8} << 30, 0}, {}, false, 0};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Scheduler> s, Scheduler::Make({n}, {}));
  const Clock::TimePoint t0 = Clock::TimePoint() + std::chrono::hours(1);
  JobSpec a;
  a.id = "a";
  a.queue = "default";
  a.per_worker = Resources{4000, 0, 0};
  ASSERT_OK(s->Adopt(a, {"n"}, t0));
  EXPECT_EQ(s->Job("a").value().phase, JobPhase::kRunning);
  JobSpec b = a;
  b.id = "b";
  ASSERT_OK(s->Submit(b, t0));
  EXPECT_TRUE(s->Schedule(t0).empty());  // n is taken by the adopted job
  JobSpec c = a;
  c.id = "c";
  EXPECT_STATUS(s->Adopt(c, {"n"}, t0), StatusCode::kInvalidArgument);  // no room left
  EXPECT_STATUS(s->Job("c"), StatusCode::kNotFound);
  ASSERT_OK(s->Finished("a", t0));
  ASSERT_OK(s->Requeue("a"));  // it stopped by itself at a checkpoint
  const std::vector<Decision> d = s->Schedule(t0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "a");  // ahead of b, its old place in line
  EXPECT_STATUS(s->Requeue("a"), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace reel::sched
