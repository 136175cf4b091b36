#include "parallel/ps_plan.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

TEST(PsPlanTest, SplitsByBytesLargestFirst) {
  // 100 -> 0; 60 -> 1; 50 -> 1 (60 < 100); 40 -> 0 (100 < 110).
  ASSERT_OK_AND_ASSIGN(std::vector<int> s, AssignToServers({40, 100, 50, 60}, 2));
  EXPECT_EQ(s, (std::vector<int>{0, 0, 1, 1}));  // loads 140 and 110
  ASSERT_OK_AND_ASSIGN(std::vector<int> one, AssignToServers({1, 2, 3}, 1));
  EXPECT_EQ(one, (std::vector<int>{0, 0, 0}));
  ASSERT_OK_AND_ASSIGN(std::vector<int> ties, AssignToServers({8, 8, 8}, 3));
  EXPECT_EQ(ties, (std::vector<int>{0, 1, 2}));
  ASSERT_OK_AND_ASSIGN(std::vector<int> more, AssignToServers({5}, 3));  // servers left empty
  EXPECT_EQ(more, (std::vector<int>{0}));
}

TEST(PsPlanTest, RefusesBadInput) {
  EXPECT_STATUS(AssignToServers({1}, 0), StatusCode::kInvalidArgument);
  EXPECT_STATUS(AssignToServers({-1}, 2), StatusCode::kInvalidArgument);
  EXPECT_STATUS(ParsePsSync("async"), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(PsSync ssp, ParsePsSync("ssp"));
  EXPECT_STREQ(PsSyncName(ssp), "ssp");
}

}  // namespace
}  // namespace reel::parallel
