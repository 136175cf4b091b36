#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::sched {
namespace {

using Kind = Decision::Kind;
using std::chrono::hours;
using std::chrono::minutes;

const Clock::TimePoint kT0 = Clock::TimePoint() + hours(100);

Node MakeNode(std::string name, int cpus, bool spot = false, double cost = 1) {
  return Node{std::move(name), Resources{cpus * 1000, int64_t{cpus} << 30, 0}, {}, spot, cost};
}

JobSpec MakeJob(std::string id, int cpus, int workers = 1, int priority = 0,
                std::string queue = "default") {
  JobSpec j;
  j.id = std::move(id);
  j.queue = std::move(queue);
  j.priority = priority;
  j.per_worker = Resources{cpus * 1000, int64_t{cpus} << 29, 0};
  j.min_workers = j.max_workers = workers;
  return j;
}

QueueSpec MakeQueue(std::string name, int quota_cpus, int borrow_cpus) {
  return QueueSpec{std::move(name), Resources{quota_cpus * 1000, int64_t{quota_cpus} << 30, 0},
                   Resources{borrow_cpus * 1000, int64_t{borrow_cpus} << 30, 0}, 1};
}

// "kind job [nodes...]" per decision, for readable expectations.
std::vector<std::string> Text(const std::vector<Decision>& decisions) {
  std::vector<std::string> out;
  for (const Decision& d : decisions) {
    static const char* const kKinds[] = {"start", "preempt", "resize", "stop"};
    std::string line = std::string(kKinds[static_cast<int>(d.kind)]) + " " + d.job;
    for (const std::string& n : d.nodes) line += " " + n;
    out.push_back(line);
  }
  return out;
}

using Lines = std::vector<std::string>;

std::unique_ptr<Scheduler> Make(std::vector<Node> nodes, std::vector<QueueSpec> queues = {}) {
  Result<std::unique_ptr<Scheduler>> s = Scheduler::Make(std::move(nodes), std::move(queues));
  EXPECT_OK(s);
  return s.ok() ? std::move(*s) : nullptr;
}

JobPhase PhaseOf(const Scheduler& s, const std::string& job) { return s.Job(job).value().phase; }

TEST(SchedulerTest, AGangStartsWhole) {
  auto s = Make({MakeNode("n1", 4), MakeNode("n2", 4)});
  ASSERT_OK(s->Submit(MakeJob("a", 2, 3), kT0));
  ASSERT_OK(s->Submit(MakeJob("b", 2, 2), kT0));
  // a takes n1 twice and n2 once; b's two workers do not both fit in what is left, so neither
  // starts.
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start a n1 n1 n2"}));
  EXPECT_EQ(PhaseOf(*s, "b"), JobPhase::kPending);
  EXPECT_EQ(s->Job("b").value().reason, "waiting for resources");
  ASSERT_OK(s->Finished("a", kT0 + minutes(1)));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(1))), (Lines{"start b n1 n1"}));
}

TEST(SchedulerTest, HigherPriorityFirstThenSubmissionOrder) {
  auto s = Make({MakeNode("n1", 2)});
  ASSERT_OK(s->Submit(MakeJob("early", 2), kT0));
  ASSERT_OK(s->Submit(MakeJob("late", 2), kT0));
  ASSERT_OK(s->Submit(MakeJob("urgent", 2, 1, 5), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start urgent n1"}));
  ASSERT_OK(s->Finished("urgent", kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start early n1"}));
}

TEST(SchedulerTest, QueuesShareByDominantResource) {
  auto s = Make({MakeNode("n1", 4)}, {MakeQueue("a", 2, 2), MakeQueue("b", 2, 2)});
  for (int i = 1; i <= 3; ++i)
    ASSERT_OK(s->Submit(MakeJob("a" + std::to_string(i), 1, 1, 0, "a"), kT0));
  for (int i = 1; i <= 3; ++i)
    ASSERT_OK(s->Submit(MakeJob("b" + std::to_string(i), 1, 1, 0, "b"), kT0));
  // a submitted everything first, yet the queues take turns.
  EXPECT_EQ(Text(s->Schedule(kT0)),
            (Lines{"start a1 n1", "start b1 n1", "start a2 n1", "start b2 n1"}));
}

TEST(SchedulerTest, AQueueBorrowsWhatOthersLeaveAndReclaimsItsQuota) {
  auto s =
      Make({MakeNode("n1", 4), MakeNode("n2", 4)}, {MakeQueue("a", 4, 4), MakeQueue("b", 4, 0)});
  ASSERT_OK(s->Submit(MakeJob("a1", 4, 1, 0, "a"), kT0));
  ASSERT_OK(s->Submit(MakeJob("a2", 4, 1, 0, "a"), kT0 + minutes(1)));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start a1 n1", "start a2 n2"}));  // a2 borrows b's
  ASSERT_OK(s->Submit(MakeJob("b1", 4, 1, 0, "b"), kT0 + minutes(2)));
  // b is within its quota: it takes it back from the borrower, newest job first.
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(2))), (Lines{"preempt a2"}));
  EXPECT_EQ(s->Job("a2").value().reason, "preempted by job b1 (priority 0)");
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(3))), Lines{});  // a2 is still stopping
  ASSERT_OK_AND_ASSIGN(std::optional<Decision> none, s->Stopped("a2", kT0 + minutes(3)));
  EXPECT_FALSE(none);
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(3))), (Lines{"start b1 n2"}));
  // a2 waits: a has its quota and nothing is left to borrow.
  EXPECT_EQ(PhaseOf(*s, "a2"), JobPhase::kPending);
  EXPECT_EQ(s->Job("a2").value().preemptions, 1);
  EXPECT_EQ(s->QueueUsage("b").value().cpu_millis, 4000);
}

TEST(SchedulerTest, BorrowingStopsAtTheLimit) {
  auto s = Make({MakeNode("n1", 8)}, {MakeQueue("a", 2, 2), MakeQueue("b", 6, 0)});
  for (int i = 1; i <= 3; ++i)
    ASSERT_OK(s->Submit(MakeJob("a" + std::to_string(i), 2, 1, 0, "a"), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start a1 n1", "start a2 n1"}));
  // n1 has room for a3, but a may not use more.
  EXPECT_EQ(s->Job("a3").value().reason, "queue a is at its quota");
  EXPECT_EQ(s->QueueUsage("a").value().cpu_millis, 4000);
  EXPECT_STATUS(s->Submit(MakeJob("huge", 2, 3, 0, "a"), kT0), StatusCode::kInvalidArgument);
}

TEST(SchedulerTest, AHigherPriorityJobPreemptsTheNewestLowerOne) {
  auto s = Make({MakeNode("n1", 4)});
  ASSERT_OK(s->Submit(MakeJob("old", 2), kT0));
  ASSERT_OK(s->Submit(MakeJob("new", 2), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start old n1", "start new n1"}));
  ASSERT_OK(s->Submit(MakeJob("same", 2), kT0 + minutes(1)));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(1))), Lines{});  // equal priority does not preempt
  ASSERT_OK(s->Submit(MakeJob("vip", 2, 1, 10), kT0 + minutes(2)));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(2))), (Lines{"preempt new"}));
  EXPECT_EQ(s->Job("vip").value().reason, "waiting for 1 preempted job(s) to stop");
  ASSERT_OK(s->Stopped("new", kT0 + minutes(3)).status());
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(3))), (Lines{"start vip n1"}));
  // new is back in line ahead of same (its original place), behind nothing else.
  ASSERT_OK(s->Finished("vip", kT0 + minutes(4)));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(4))), (Lines{"start new n1"}));
}

TEST(SchedulerTest, AJobThatFinishesWhileBeingPreemptedIsDoneAndFreesItsRoom) {
  auto s = Make({MakeNode("n1", 2)});
  ASSERT_OK(s->Submit(MakeJob("low", 2), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start low n1"}));
  ASSERT_OK(s->Submit(MakeJob("vip", 2, 1, 10), kT0 + minutes(1)));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(1))), (Lines{"preempt low"}));
  // Its work was done before it saw the request: it ended, it is not requeued.
  ASSERT_OK(s->Finished("low", kT0 + minutes(2)));
  EXPECT_EQ(PhaseOf(*s, "low"), JobPhase::kDone);
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(2))), (Lines{"start vip n1"}));
  ASSERT_OK(s->Finished("vip", kT0 + minutes(3)));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(3))), Lines{});
}

TEST(SchedulerTest, WithoutPreemptionAHigherPriorityJobWaits) {
  SchedulerOptions options;
  options.preemption = false;
  auto made = Scheduler::Make({MakeNode("n1", 2)}, {}, options);
  ASSERT_OK(made);
  Scheduler& s = **made;
  ASSERT_OK(s.Submit(MakeJob("low", 2), kT0));
  EXPECT_EQ(Text(s.Schedule(kT0)), (Lines{"start low n1"}));
  ASSERT_OK(s.Submit(MakeJob("vip", 2, 1, 10), kT0 + minutes(1)));
  EXPECT_EQ(Text(s.Schedule(kT0 + minutes(1))), Lines{});
  ASSERT_OK(s.Finished("low", kT0 + minutes(2)));
  EXPECT_EQ(Text(s.Schedule(kT0 + minutes(2))), (Lines{"start vip n1"}));
}

TEST(SchedulerTest, ANewPriorityMovesAPendingJobAndMakesARunningOneAVictim) {
  auto s = Make({MakeNode("n1", 2)});
  ASSERT_OK(s->Submit(MakeJob("run", 2, 1, 5), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start run n1"}));
  ASSERT_OK(s->Submit(MakeJob("a", 2, 1, 1), kT0));
  ASSERT_OK(s->Submit(MakeJob("b", 2, 1, 1), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), Lines{});  // below the running job's priority
  ASSERT_OK(s->SetPriority("b", 3));           // b goes before a
  ASSERT_OK(s->SetPriority("run", 0));         // and now outranks the running job
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(1))), (Lines{"preempt run"}));
  ASSERT_OK(s->Stopped("run", kT0 + minutes(1)).status());
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(1))), (Lines{"start b n1"}));
  EXPECT_STATUS(s->SetPriority("nope", 1), StatusCode::kNotFound);
}

TEST(SchedulerTest, BackfillNeverDelaysTheReservation) {
  auto s = Make({MakeNode("n1", 4), MakeNode("n2", 4)});
  JobSpec x = MakeJob("x", 4);
  x.time_limit = minutes(10);
  JobSpec y = MakeJob("y", 2);
  y.time_limit = minutes(60);
  ASSERT_OK(s->Submit(x, kT0));
  ASSERT_OK(s->Submit(y, kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start x n1", "start y n2"}));
  // big needs both nodes whole: free at the latest by y's limit, an hour from now.
  ASSERT_OK(s->Submit(MakeJob("big", 4, 2), kT0));
  JobSpec quick = MakeJob("quick", 2);
  quick.time_limit = minutes(30);  // done before the hour: may go first
  JobSpec slow = MakeJob("slow", 2);
  slow.time_limit = minutes(120);  // would hold n2 past the hour: must wait
  ASSERT_OK(s->Submit(slow, kT0));
  ASSERT_OK(s->Submit(quick, kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start quick n2"}));
  EXPECT_EQ(PhaseOf(*s, "slow"), JobPhase::kPending);
}

TEST(SchedulerTest, BackfillUsesNodesTheReservationLeaves) {
  Node gpu = MakeNode("gpu1", 8);
  gpu.labels["gpu"] = "yes";
  auto s = Make({gpu, MakeNode("cpu1", 4)});
  JobSpec hold = MakeJob("hold", 4);
  hold.node_selector["gpu"] = "yes";
  hold.time_limit = hours(1);
  ASSERT_OK(s->Submit(hold, kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start hold gpu1"}));
  JobSpec next = MakeJob("next", 8);
  next.node_selector["gpu"] = "yes";
  ASSERT_OK(s->Submit(next, kT0));
  // gpu1 has room for `other` now, but `next` gets it within the hour and `other` has no limit:
  // it goes to cpu1 instead.
  ASSERT_OK(s->Submit(MakeJob("other", 4), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start other cpu1"}));
}

TEST(SchedulerTest, SpotNodesTakeOnlyJobsThatAcceptThemAndReclaimRequeues) {
  auto s = Make(
      {MakeNode("od1", 4, false, 3), MakeNode("spot2", 4, true, 2), MakeNode("spot1", 4, true, 1)});
  JobSpec cheap = MakeJob("cheap", 4);
  cheap.spot_ok = true;
  ASSERT_OK(s->Submit(cheap, kT0));
  ASSERT_OK(s->Submit(MakeJob("steady", 4), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start cheap spot1", "start steady od1"}));
  ASSERT_OK_AND_ASSIGN(std::vector<Decision> reclaimed, s->Reclaim("spot1", kT0 + hours(2)));
  EXPECT_EQ(Text(reclaimed), (Lines{"preempt cheap"}));
  EXPECT_EQ(reclaimed[0].reason, "spot node spot1 reclaimed");
  ASSERT_OK(s->Stopped("cheap", kT0 + hours(2)).status());
  EXPECT_DOUBLE_EQ(s->Job("cheap").value().cost, 2.0);  // 2 hours at 1 an hour
  // It resumes elsewhere: the next cheapest spot node; spot1 takes nothing until restored.
  EXPECT_EQ(Text(s->Schedule(kT0 + hours(2))), (Lines{"start cheap spot2"}));
  ASSERT_OK(s->Restore("spot1"));
  EXPECT_STATUS(s->Reclaim("nope", kT0), StatusCode::kNotFound);
}

TEST(SchedulerTest, AJobPastItsTimeLimitIsStopped) {
  auto s = Make({MakeNode("n1", 4)});
  JobSpec j = MakeJob("j", 4);
  j.time_limit = hours(1);
  ASSERT_OK(s->Submit(j, kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start j n1"}));
  EXPECT_EQ(Text(s->Schedule(kT0 + minutes(59))), Lines{});
  const std::vector<Decision> d = s->Schedule(kT0 + hours(1));
  EXPECT_EQ(Text(d), (Lines{"stop j"}));
  EXPECT_EQ(d[0].reason, "time limit 3600s");
  ASSERT_OK(s->Finished("j", kT0 + hours(1)));
  EXPECT_EQ(PhaseOf(*s, "j"), JobPhase::kDone);
}

TEST(SchedulerTest, AnElasticJobShrinksForPriorityAndGrowsBack) {
  auto s = Make({MakeNode("n1", 4), MakeNode("n2", 4)});
  JobSpec e = MakeJob("elastic", 1);
  e.min_workers = 2;
  e.max_workers = 8;
  ASSERT_OK(s->Submit(e, kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start elastic n1 n1 n1 n1 n2 n2 n2 n2"}));
  ASSERT_OK(s->Submit(MakeJob("vip", 4, 1, 5), kT0));
  // Shrinking (to 4) makes room: no one is stopped for good.
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"resize elastic n1 n1 n1 n1"}));
  ASSERT_OK_AND_ASSIGN(std::optional<Decision> restart, s->Stopped("elastic", kT0));
  ASSERT_TRUE(restart);
  EXPECT_EQ(Text({*restart}), (Lines{"start elastic n1 n1 n1 n1"}));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start vip n2"}));
  ASSERT_OK(s->Finished("vip", kT0 + hours(1)));
  EXPECT_EQ(Text(s->Schedule(kT0 + hours(1))), (Lines{"resize elastic n1 n1 n1 n1 n2 n2 n2 n2"}));
  ASSERT_OK_AND_ASSIGN(restart, s->Stopped("elastic", kT0 + hours(1)));
  EXPECT_EQ(Text({*restart}), (Lines{"start elastic n1 n1 n1 n1 n2 n2 n2 n2"}));
  EXPECT_EQ(s->QueueUsage("default").value().cpu_millis, 8000);
}

TEST(SchedulerTest, BadJobsAreRefused) {
  auto s = Make({MakeNode("n1", 4)});
  ASSERT_OK(s->Submit(MakeJob("a", 1), kT0));
  EXPECT_STATUS(s->Submit(MakeJob("a", 1), kT0), StatusCode::kInvalidArgument);
  EXPECT_STATUS(s->Submit(MakeJob("b", 1, 1, 0, "nope"), kT0), StatusCode::kInvalidArgument);
  EXPECT_STATUS(s->Submit(MakeJob("c", 8), kT0), StatusCode::kInvalidArgument);
  EXPECT_STATUS(s->Submit(MakeJob("d", 0), kT0), StatusCode::kInvalidArgument);
  JobSpec gang = MakeJob("e", 2, 3);
  Status too_big = s->Submit(gang, kT0);
  EXPECT_EQ(
      too_big.message(),
      "job e: 3 workers of cpu 2, memory 1Gi do not fit on the cluster's nodes even when idle");
  EXPECT_EQ(s->pending(), 1u);
}

TEST(SchedulerTest, CancelRemovesPendingAndStopsRunning) {
  auto s = Make({MakeNode("n1", 4)});
  ASSERT_OK(s->Submit(MakeJob("run", 4), kT0));
  ASSERT_OK(s->Submit(MakeJob("wait", 4), kT0));
  EXPECT_EQ(Text(s->Schedule(kT0)), (Lines{"start run n1"}));
  ASSERT_OK_AND_ASSIGN(std::optional<Decision> none, s->Cancel("wait", kT0));
  EXPECT_FALSE(none);
  EXPECT_EQ(s->pending(), 0u);
  ASSERT_OK_AND_ASSIGN(std::optional<Decision> stop, s->Cancel("run", kT0));
  ASSERT_TRUE(stop);
  EXPECT_EQ(Text({*stop}), (Lines{"stop run"}));
  ASSERT_OK(s->Finished("run", kT0));
  EXPECT_EQ(s->running(), 0u);
  EXPECT_STATUS(s->Cancel("ghost", kT0), StatusCode::kNotFound);
}

}  // namespace
}  // namespace reel::sched
