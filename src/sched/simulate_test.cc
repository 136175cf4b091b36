#include "sched/simulate.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::sched {
namespace {

TraceJob Job(int64_t submit, int64_t duration, int gpus, std::string queue = "vc") {
  return TraceJob{submit, duration, gpus, std::move(queue)};
}

SimulationResult SimulateOn(const std::vector<TraceJob>& jobs, Policy policy, bool backfill,
                            int gpus) {
  SimulationOptions o;
  o.policy = policy;
  o.backfill = backfill;
  o.nodes = 1;
  o.gpus_per_node = gpus;
  Result<SimulationResult> r = Simulate(jobs, o);
  EXPECT_OK(r);
  return r.ok() ? *r : SimulationResult{};
}

TEST(SimulateTest, BackfillRunsASmallJobAheadWithoutDelayingTheReservation) {
  // A holds half the node; B needs all of it (reserved for when A ends, t=100); C fits beside A
  // and ends before 100.
  const std::vector<TraceJob> jobs = {Job(0, 100, 2), Job(1, 10, 4), Job(2, 50, 2)};
  const SimulationResult strict = SimulateOn(jobs, Policy::kFifo, false, 4);
  EXPECT_DOUBLE_EQ(strict.avg_jct_s, (100 + 109 + 158) / 3.0);  // C waits behind B
  const SimulationResult easy = SimulateOn(jobs, Policy::kFifo, true, 4);
  EXPECT_DOUBLE_EQ(easy.avg_jct_s, (100 + 109 + 50) / 3.0);  // B still ends at 110
  EXPECT_DOUBLE_EQ(easy.makespan_s, 110);
  EXPECT_DOUBLE_EQ(easy.avg_queue_s, (0 + 99 + 0) / 3.0);
}

TEST(SimulateTest, ShortestFirstReordersTheLine) {
  const std::vector<TraceJob> jobs = {Job(0, 100, 1), Job(1, 50, 1), Job(2, 10, 1)};
  EXPECT_DOUBLE_EQ(SimulateOn(jobs, Policy::kFifo, false, 1).avg_jct_s, (100 + 149 + 158) / 3.0);
  EXPECT_DOUBLE_EQ(SimulateOn(jobs, Policy::kSjf, false, 1).avg_jct_s, (100 + 159 + 108) / 3.0);
}

TEST(SimulateTest, LeastAttainedServiceDemotesALongJobAndPreemptsIt) {
  // A passes one GPU-hour at t=3600 and drops a queue; B, new, preempts it and runs; A resumes
  // where it stopped.
  const std::vector<TraceJob> jobs = {Job(0, 10000, 1), Job(4000, 100, 1)};
  const SimulationResult las = SimulateOn(jobs, Policy::kLas, false, 1);
  EXPECT_EQ(las.preemptions, 1);
  EXPECT_DOUBLE_EQ(las.avg_jct_s, (10100 + 100) / 2.0);
  const SimulationResult fifo = SimulateOn(jobs, Policy::kFifo, false, 1);
  EXPECT_EQ(fifo.preemptions, 0);
  EXPECT_DOUBLE_EQ(fifo.avg_jct_s, (10000 + 6100) / 2.0);
}

TEST(SimulateTest, PriorityLetsOneGpuJobsPreemptLargerOnes) {
  const std::vector<TraceJob> jobs = {Job(0, 1000, 8), Job(10, 10, 1)};
  const SimulationResult r = SimulateOn(jobs, Policy::kPriority, false, 8);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_DOUBLE_EQ(r.avg_jct_s, (1010 + 10) / 2.0);
}

TEST(SimulateTest, DrfTakesTurnsBetweenQueues) {
  // Queue a holds one of two GPUs for long; when the other frees, b's waiting job (share 0)
  // goes before a's next one (share 1/2), though a's was submitted first.
  const std::vector<TraceJob> jobs = {Job(0, 100, 1, "a"), Job(1, 10, 1, "a"), Job(2, 10, 1, "a"),
                                      Job(3, 1, 1, "b")};
  EXPECT_DOUBLE_EQ(SimulateOn(jobs, Policy::kFifo, false, 2).avg_jct_s, (100 + 10 + 19 + 19) / 4.0);
  EXPECT_DOUBLE_EQ(SimulateOn(jobs, Policy::kDrf, false, 2).avg_jct_s, (100 + 10 + 20 + 9) / 4.0);
}

TEST(SimulateTest, ReadsThePhillyTraceSortedAndNamesBadLines) {
  TempDir dir;
  const std::string path = dir.path() + "/t.csv";
  std::ofstream(path) << "timestamp,duration,num_gpus,gpu_time,cluster\n"
                         "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                         "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n";
  ASSERT_OK_AND_ASSIGN(std::vector<TraceJob> jobs, ReadPhillyTrace(path));
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].submit_s, 0);
  EXPECT_EQ(jobs[0].gpus, 8);
  EXPECT_EQ(jobs[0].queue, "6214e9");
  EXPECT_EQ(jobs[1].submit_s, 48 * 60 + 52);
  EXPECT_EQ(jobs[1].duration_s, 66);
  std::ofstream(path) << "timestamp,duration,num_gpus,gpu_time,cluster\n"
                         "2017-10-09 07:01:55,66.0,none,66.0,11cb48\n";
  EXPECT_STATUS(ReadPhillyTrace(path), StatusCode::kInvalidArgument);
  EXPECT_NE(ReadPhillyTrace(path).status().message().find("t.csv:2: num_gpus 'none'"),
            std::string::npos);
  EXPECT_STATUS(ReadPhillyTrace(dir.path() + "/none.csv"), StatusCode::kNotFound);
  EXPECT_STATUS(ParsePolicy("random"), StatusCode::kInvalidArgument);
}

TEST(SimulateTest, ASliceOfTheRealTraceFinishesEveryJob) {
  ASSERT_OK_AND_ASSIGN(std::vector<TraceJob> all,
                       ReadPhillyTrace(testing::SourcePath("testdata/traces/philly.csv")));
  ASSERT_EQ(all.size(), 82247u);
  const std::vector<TraceJob> slice(all.begin(), all.begin() + 3000);
  for (Policy p : {Policy::kFifo, Policy::kPriority, Policy::kSjf, Policy::kLas, Policy::kDrf}) {
    SimulationOptions o;
    o.policy = p;
    ASSERT_OK_AND_ASSIGN(SimulationResult r, Simulate(slice, o));
    EXPECT_EQ(r.jobs, 3000);
    EXPECT_GT(r.utilisation, 0.1) << PolicyName(p);
    EXPECT_LE(r.utilisation, 1.0) << PolicyName(p);
    EXPECT_GE(r.avg_queue_s, 0) << PolicyName(p);
    EXPECT_GE(r.p95_jct_s, r.avg_jct_s * 0.5) << PolicyName(p);
  }
}

}  // namespace
}  // namespace reel::sched
