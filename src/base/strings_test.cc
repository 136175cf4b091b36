#include "base/strings.h"

#include <gtest/gtest.h>

namespace reel {
namespace {

TEST(Strings, ParseInt64TakesWholeIntegersOnly) {
  EXPECT_EQ(ParseInt64("42"), 42);
  EXPECT_EQ(ParseInt64("-7"), -7);
  EXPECT_EQ(ParseInt64("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", " 1", "1 ", "1.5", "0x10", "+1", "9223372036854775808", "1:3"}) {
    EXPECT_EQ(ParseInt64(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(Strings, FormatDoubleIsShortestAndExact) {
  EXPECT_EQ(FormatDouble(5), "5");
  EXPECT_EQ(FormatDouble(0.1), "0.1");
  EXPECT_EQ(FormatDouble(64.5), "64.5");
  EXPECT_EQ(std::stod(FormatDouble(1.0 / 3)), 1.0 / 3);
}

TEST(Strings, PrintableForMessageEscapesAndCuts) {
  EXPECT_EQ(PrintableForMessage("a\nb"), "a\\x0ab");
  EXPECT_EQ(PrintableForMessage("abcdef", 3), "abc...");
}

}  // namespace
TEST(Strings, SplitAndJoinAreInverse) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitString("a,,b", ','), (V{"a", "", "b"}));
  EXPECT_EQ(SplitString("", ','), (V{""}));
  EXPECT_EQ(SplitString("x,", ','), (V{"x", ""}));
  EXPECT_EQ(JoinStrings({"a", "", "b"}, ","), "a,,b");
  EXPECT_EQ(JoinStrings({}, ", "), "");
  EXPECT_EQ(JoinStrings(SplitString("http://a:1,http://b:2", ','), ","), "http://a:1,http://b:2");
}

}  // namespace reel
