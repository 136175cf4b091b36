#include "parallel/planner.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Four equal units measured on one clip: `seconds` each, `parameters` and `activations` bytes.
LayoutInputs Inputs(double seconds, int64_t parameters, int64_t activations, int world) {
  LayoutInputs in;
  for (int u = 0; u < 4; ++u) {
    in.units.push_back({"unit" + std::to_string(u), seconds, parameters, activations});
  }
  in.measured_clips = 1;
  in.batch = 8;
  in.micro_batches = 4;
  in.world = world;
  in.link_bytes_per_s = 1e9;
  return in;
}

TEST(PlannerTest, AModelThatFitsTrainsDataParallel) {
  // 4 MiB of parameters, 10 ms a unit per clip: the all-reduce is a sliver of the step.
  ASSERT_OK_AND_ASSIGN(LayoutChoice c, ChooseLayout(Inputs(0.01, kMiB, kMiB, 4)));
  EXPECT_EQ(c.chosen.replicas, 4);
  EXPECT_EQ(c.chosen.stages, 1);
  ASSERT_EQ(c.considered.size(), 3u);  // 4 x 1, 2 x 2, 1 x 4
  EXPECT_EQ(c.considered[1].stages, 2);
  EXPECT_EQ(c.considered[2].stages, 4);
  EXPECT_NE(c.why.find("data parallel: a replica needs"), std::string::npos) << c.why;
  // compute: 4 units x 10 ms x 8 clips; all-reduce: 2 x 3/4 x 4 MiB at 1 GB/s
  EXPECT_NEAR(c.chosen.compute_seconds, 0.32, 1e-9);
  EXPECT_NEAR(c.chosen.allreduce_seconds, 1.5 * 4 * kMiB / 1e9, 1e-9);
  EXPECT_EQ(c.chosen.exposed_allreduce_seconds, 0);  // hidden behind backward
  EXPECT_NEAR(c.chosen.step_seconds, 0.32, 1e-9);
  EXPECT_NEAR(c.chosen.clips_per_second, 32 / c.chosen.step_seconds, 1e-9);
  // The pipeline layouts average their gradients after the step: nothing hides it.
  EXPECT_GT(c.considered[1].exposed_allreduce_seconds, 0);
  EXPECT_EQ(c.considered[1].exposed_allreduce_seconds, c.considered[1].allreduce_seconds);
}

TEST(PlannerTest, AReplicaTooBigForAWorkerIsCutIntoStages) {
  LayoutInputs in = Inputs(0.01, 16 * kMiB, kMiB, 4);
  // A replica: 64 MiB x 3 copies + 4 units x 8 clips x 1 MiB = 224 MiB. Two stages of 1F1B
  // hold 2 and 1 micro-batches of 2 clips: 96 + 8 MiB at most.
  in.worker_memory = 120 * kMiB;
  ASSERT_OK_AND_ASSIGN(LayoutChoice c, ChooseLayout(in));
  EXPECT_FALSE(c.considered[0].fits);
  EXPECT_EQ(c.considered[0].memory_bytes, 224 * kMiB);
  EXPECT_EQ(c.chosen.replicas, 2);  // 2 x 2 fits and moves twice the clips of 1 x 4
  EXPECT_EQ(c.chosen.stages, 2);
  EXPECT_EQ(c.chosen.cuts, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(c.chosen.memory_bytes, 104 * kMiB);
  EXPECT_NE(c.why.find("2 x 2 (2 replicas of 2 stages): a replica needs 224.0 MiB, more than the "
                       "120.0 MiB a worker has"),
            std::string::npos)
      << c.why;
  // GPipe holds all 4 micro-batches on each stage: 96 + 16 MiB.
  in.gpipe = true;
  ASSERT_OK_AND_ASSIGN(c, ChooseLayout(in));
  EXPECT_EQ(c.chosen.memory_bytes, 112 * kMiB);
}

TEST(PlannerTest, ASlowLinkAndHeavyParametersFavourThePipeline) {
  // 256 MiB of parameters a unit and 1 ms of compute per clip over a 100 MB/s link: data
  // parallel's all-reduce dwarfs the compute; a pipeline of 2 sends small activations instead.
  LayoutInputs in = Inputs(0.001, 256 * kMiB, 64 * 1024, 2);
  in.link_bytes_per_s = 1e8;
  ASSERT_OK_AND_ASSIGN(LayoutChoice c, ChooseLayout(in));
  EXPECT_EQ(c.chosen.replicas, 1);
  EXPECT_EQ(c.chosen.stages, 2);
  EXPECT_GT(c.chosen.clips_per_second, c.considered[0].clips_per_second * 1.1);
  EXPECT_NE(c.why.find("1 x 2 (pipeline): estimated"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("against data parallel's"), std::string::npos) << c.why;
  // Within the margin, data parallel stays.
  in.margin = 1000;
  ASSERT_OK_AND_ASSIGN(c, ChooseLayout(in));
  EXPECT_EQ(c.chosen.stages, 1);
}

TEST(PlannerTest, NothingThatFitsAndBadInputsAreRefused) {
  LayoutInputs in = Inputs(0.01, 64 * kMiB, kMiB, 4);
  in.worker_memory = 100 * kMiB;  // one unit alone needs 192 MiB
  auto none = ChooseLayout(in);
  EXPECT_STATUS(none, StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no layout of 4 processes fits 100.0 MiB per worker"),
            std::string::npos)
      << none.status().message();
  in = Inputs(0.01, kMiB, kMiB, 2);
  in.link_bytes_per_s = 0;
  EXPECT_STATUS(ChooseLayout(in), StatusCode::kInvalidArgument);
  in.units.clear();
  EXPECT_STATUS(ChooseLayout(in), StatusCode::kInvalidArgument);
}

TEST(PlannerTest, MicroBatchesInFlightPerSchedule) {
  EXPECT_EQ(MicroBatchesInFlight(3, 4, /*gpipe=*/true), (std::vector<int>{4, 4, 4}));
  EXPECT_EQ(MicroBatchesInFlight(3, 4, /*gpipe=*/false), (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(MicroBatchesInFlight(4, 2, /*gpipe=*/false), (std::vector<int>{2, 2, 2, 1}));
}

TEST(PlannerTest, OneProcessIsDataParallelOfOne) {
  ASSERT_OK_AND_ASSIGN(LayoutChoice c, ChooseLayout(Inputs(0.01, kMiB, kMiB, 1)));
  EXPECT_EQ(LayoutName(c.chosen), "1 x 1 (data parallel)");
  EXPECT_EQ(c.chosen.allreduce_seconds, 0);
}

}  // namespace
}  // namespace reel::parallel
