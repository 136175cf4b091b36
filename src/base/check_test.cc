#include "base/check.h"

#include <gtest/gtest.h>

#include "base/status.h"

namespace reel {
namespace {

TEST(CheckDeathTest, AFailedCheckAbortsWithFileLineConditionAndMessage) {
  int offset = 7;
  EXPECT_DEATH(REEL_CHECK(offset < 5) << "offset " << offset << " past the end",
               "check_test.cc:[0-9]+: Check failed: offset < 5: offset 7 past the end");
  EXPECT_DEATH(REEL_CHECK(offset == 0), "Check failed: offset == 0\n");
}

TEST(CheckTest, APassingCheckEvaluatesItsConditionOnceAndNotItsMessage) {
  int evaluated = 0, streamed = 0;
  auto message = [&] { return ++streamed; };
  REEL_CHECK(++evaluated == 1) << message();
  EXPECT_EQ(evaluated, 1);
  EXPECT_EQ(streamed, 0);
}

TEST(CheckDeathTest, ChecksStayOnUnderNdebug) {
#ifdef NDEBUG
  EXPECT_DEATH(REEL_CHECK(false), "Check failed: false");
  int evaluated = 0;
  REEL_DCHECK(++evaluated > 0);
  EXPECT_EQ(evaluated, 0) << "REEL_DCHECK evaluates nothing in release builds";
#else
  EXPECT_DEATH(REEL_DCHECK(false), "Check failed: false");
#endif
}

TEST(CheckDeathTest, ValueOfAnErrorResultIsABugThatAborts) {
  Result<int> failed = NotFoundError("no such key");
  EXPECT_DEATH((void)failed.value(), "value\\(\\) of an error Result: NotFound: no such key");
}

}  // namespace
}  // namespace reel
