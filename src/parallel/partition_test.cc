#include "parallel/partition.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

std::vector<UnitCost> Units(const std::vector<double>& seconds,
                            const std::vector<int64_t>& parameters = {},
                            const std::vector<int64_t>& activations = {}) {
  std::vector<UnitCost> units;
  for (size_t i = 0; i < seconds.size(); ++i) {
    units.push_back({"u" + std::to_string(i), seconds[i], parameters.empty() ? 0 : parameters[i],
                     activations.empty() ? 0 : activations[i]});
  }
  return units;
}

TEST(BalanceStagesTest, EqualUnitsSplitEvenly) {
  ASSERT_OK_AND_ASSIGN(StagePlan plan, BalanceStages(Units({1, 1, 1, 1, 1, 1}), 3));
  EXPECT_EQ(plan.cuts, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_DOUBLE_EQ(plan.slowest_seconds, 2);
  EXPECT_EQ(plan.seconds, (std::vector<double>{2, 2, 2}));
}

TEST(BalanceStagesTest, ASlowUnitGetsAStageOfItsOwn) {
  ASSERT_OK_AND_ASSIGN(StagePlan plan, BalanceStages(Units({4, 1, 1, 1, 1}), 2));
  EXPECT_EQ(plan.cuts, (std::vector<int>{0, 1, 5}));
  EXPECT_DOUBLE_EQ(plan.slowest_seconds, 4);
}

TEST(BalanceStagesTest, MemoryRulesOutTheFastestSplit) {
  PartitionOptions o;
  o.state_copies = 1;
  o.memory_limit = 25;  // two units' parameters per stage at most
  ASSERT_OK_AND_ASSIGN(StagePlan plan, BalanceStages(Units({3, 1, 1, 1}, {10, 10, 10, 10}), 2, o));
  EXPECT_EQ(plan.cuts, (std::vector<int>{0, 2, 4}));  // not {0, 1, 4}, whose last stage needs 30
  EXPECT_DOUBLE_EQ(plan.slowest_seconds, 4);
  EXPECT_EQ(plan.memory_bytes, (std::vector<int64_t>{20, 20}));
}

TEST(BalanceStagesTest, EarlierStagesHoldMoreMicroBatchesUnder1F1B) {
  PartitionOptions o;
  o.memory_limit = 30;
  o.in_flight = {2, 1};  // 1F1B on two stages
  ASSERT_OK_AND_ASSIGN(StagePlan plan,
                       BalanceStages(Units({1, 1, 1, 1}, {}, {10, 10, 10, 10}), 2, o));
  EXPECT_EQ(plan.cuts, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(plan.memory_bytes, (std::vector<int64_t>{20, 30}));
}

TEST(BalanceStagesTest, ImpossibleRequestsAreClearErrors) {
  PartitionOptions o;
  o.state_copies = 1;
  o.memory_limit = 5;
  Result<StagePlan> none = BalanceStages(Units({1, 1}, {10, 10}), 2, o);
  EXPECT_STATUS(none, StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("at least 10"), std::string::npos)
      << none.status().ToString();
  EXPECT_STATUS(BalanceStages(Units({1, 1}), 3), StatusCode::kInvalidArgument);
  EXPECT_STATUS(BalanceStages(Units({1, -1}), 2), StatusCode::kInvalidArgument);
  PartitionOptions wrong;
  wrong.in_flight = {1};
  EXPECT_STATUS(BalanceStages(Units({1, 1}), 2, wrong), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::parallel
