// The simulator and the live scheduler share the core: a slice of the Philly trace replayed by
// the simulator and by the daemon (its HTTP API, job records in SQLite, decisions carried out
// through a job runner) on a fake clock gives the same placements, job by job.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>

#include "base/clock.h"
#include "http/client.h"
#include "sched/daemon.h"
#include "sched/job_runner.h"
#include "sched/simulate.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::sched {
namespace {

using std::chrono::seconds;

// Runs nothing: a job "runs" for the seconds its command names (["sleep", "N"]) of the fake
// clock, and its starts are recorded as placements.
class ClockRunner : public internal::JobRunner {
 public:
  explicit ClockRunner(FakeClock* clock) : clock_(clock) {}

  Result<int64_t> Start(const JobRecord& job, const std::vector<std::string>& nodes,
                        const std::string& dir) override {
    (void)dir;
    const int64_t now = Seconds();
    ends_[job.spec.id] = now + std::stoll(job.command.at(1));
    // "job-7" is the trace's job 6: the test submits them in order.
    placements.push_back({std::stoull(job.spec.id.substr(4)) - 1, now, nodes});
    return int64_t{1};
  }
  void Signal(const JobRecord& job, int signal) override {
    (void)job;
    (void)signal;
    ADD_FAILURE() << "nothing is preempted under fifo";
  }
  std::optional<internal::JobEnd> Poll(const JobRecord& job, const std::string& dir) override {
    (void)dir;
    const auto it = ends_.find(job.spec.id);
    if (it == ends_.end() || it->second > Seconds()) return std::nullopt;
    ends_.erase(it);
    return internal::JobEnd{};
  }

  // The next end of a running job; LLONG_MAX when none runs.
  int64_t NextEnd() const {
    int64_t next = LLONG_MAX;
    for (const auto& [id, end] : ends_) next = std::min(next, end);
    return next;
  }
  int64_t Seconds() const {
    return std::chrono::duration_cast<seconds>(clock_->Now() - kStart).count();
  }

  static constexpr Clock::TimePoint kStart = Clock::TimePoint() + std::chrono::hours(1);
  std::vector<Placement> placements;

 private:
  FakeClock* clock_;
  std::map<std::string, int64_t> ends_;
};

// The job as a user would submit it: its GPUs on whole nodes beyond one, its duration as its
// time limit (what backfill reads), and as its command's argument.
std::string JobJson(const TraceJob& j, int gpus_per_node) {
  const int workers = (j.gpus + gpus_per_node - 1) / gpus_per_node;
  const int64_t limit = std::max<int64_t>(j.duration_s, 1);
  return nlohmann::json{{"command", {"sleep", std::to_string(j.duration_s)}},
                        {"workers", workers},
                        {"resources", {{"cpu", "0"}, {"gpu", (j.gpus + workers - 1) / workers}}},
                        {"time_limit", std::to_string(limit) + "s"}}
      .dump();
}

TEST(ReplayTest, TheDaemonPlacesATraceSliceAsTheSimulatorDoes) {
  ASSERT_OK_AND_ASSIGN(std::vector<TraceJob> all,
                       ReadPhillyTrace(testing::SourcePath("testdata/traces/philly.csv")));
  // 300 jobs of at most 16 GPUs on 4 nodes of 8: enough to queue, gangs included.
  std::vector<TraceJob> slice;
  for (const TraceJob& j : all) {
    if (j.gpus <= 16) slice.push_back(j);
    if (slice.size() == 300) break;
  }
  SimulationOptions o;
  o.policy = Policy::kFifo;
  o.backfill = true;
  o.nodes = 4;
  ASSERT_OK_AND_ASSIGN(SimulationResult simulated, Simulate(slice, o));

  TempDir dir;
  std::ofstream(dir.path() + "/cluster.yaml") << "nodes:\n"
                                                 "  - {name: n0, cpu: 64, memory: 1Ti, gpu: 8}\n"
                                                 "  - {name: n1, cpu: 64, memory: 1Ti, gpu: 8}\n"
                                                 "  - {name: n2, cpu: 64, memory: 1Ti, gpu: 8}\n"
                                                 "  - {name: n3, cpu: 64, memory: 1Ti, gpu: 8}\n";
  FakeClock clock(ClockRunner::kStart);
  auto runner = std::make_shared<ClockRunner>(&clock);
  DaemonOptions d;
  d.state_dir = dir.path() + "/state";
  d.cluster_file = dir.path() + "/cluster.yaml";
  d.port = 0;
  d.clock = &clock;
  d.runner = runner;
  d.tick_thread = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Daemon> daemon, Daemon::Start(d));
  ASSERT_OK_AND_ASSIGN(http::Client client, http::Client::Make(daemon->url()));

  size_t next = 0;
  while (next < slice.size() || runner->NextEnd() != LLONG_MAX) {
    const int64_t t = std::min<int64_t>(next < slice.size() ? slice[next].submit_s : LLONG_MAX,
                                        runner->NextEnd());
    clock.Advance(seconds(t - runner->Seconds()));
    for (; next < slice.size() && slice[next].submit_s == t; ++next) {
      ASSERT_OK_AND_ASSIGN(http::Response r,
                           client.Post("/v1/jobs", JobJson(slice[next], o.gpus_per_node)));
      ASSERT_EQ(r.status, 201) << r.body;
    }
    ASSERT_OK(daemon->Tick());
  }
  daemon->Shutdown();
  ASSERT_EQ(runner->placements.size(), slice.size());
  ASSERT_EQ(simulated.placements.size(), slice.size());
  // The slice is one that tests something: jobs waited, gangs spanned nodes, and some started
  // ahead of a job submitted before them (backfill).
  int waited = 0, gangs = 0, ahead = 0;
  for (size_t i = 0; i < slice.size(); ++i) {
    const Placement& p = simulated.placements[i];
    waited += p.at_s > slice[p.job].submit_s;
    gangs += p.nodes.size() > 1;
    ahead += i > 0 && p.job < simulated.placements[i - 1].job;
  }
  EXPECT_GT(waited, 10);
  EXPECT_GT(gangs, 0);
  EXPECT_GT(ahead, 0);
  for (size_t i = 0; i < slice.size(); ++i) {
    const Placement& s = simulated.placements[i];
    const Placement& l = runner->placements[i];
    ASSERT_TRUE(s == l) << "start " << i << ": simulated job " << s.job << " at " << s.at_s
                        << "s, live job " << l.job << " at " << l.at_s << "s";
  }
}

}  // namespace
}  // namespace reel::sched
