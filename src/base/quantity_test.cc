#include "base/quantity.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel {
namespace {

using std::chrono::milliseconds;

TEST(QuantityTest, CpuInCoresOrMillicores) {
  EXPECT_EQ(ParseCpuMillicores("2").value(), 2000);
  EXPECT_EQ(ParseCpuMillicores("0.5").value(), 500);
  EXPECT_EQ(ParseCpuMillicores(".25").value(), 250);
  EXPECT_EQ(ParseCpuMillicores("500m").value(), 500);
  EXPECT_EQ(ParseCpuMillicores("0").value(), 0);
  for (const char* bad : {"", "m", "two", "-1", "1.5.2", "2Gi", "0.5m", " 2"}) {
    EXPECT_STATUS(ParseCpuMillicores(bad), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseCpuMillicores("2Gi").status().message().find("cpu '2Gi'"), std::string::npos);
}

TEST(QuantityTest, MemoryWithBinaryAndDecimalUnits) {
  EXPECT_EQ(ParseMemoryBytes("4Gi").value(), int64_t{4} << 30);
  EXPECT_EQ(ParseMemoryBytes("512Mi").value(), int64_t{512} << 20);
  EXPECT_EQ(ParseMemoryBytes("1.5Gi").value(), int64_t{3} << 29);
  EXPECT_EQ(ParseMemoryBytes("1G").value(), 1000000000);
  EXPECT_EQ(ParseMemoryBytes("100k").value(), 100000);
  EXPECT_EQ(ParseMemoryBytes("1073741824").value(), int64_t{1} << 30);
  EXPECT_EQ(ParseMemoryBytes("1Ti").value(), int64_t{1} << 40);
  for (const char* bad : {"", "Gi", "4GB", "lots", "-1Gi", "100Ei"}) {
    EXPECT_STATUS(ParseMemoryBytes(bad), StatusCode::kInvalidArgument) << bad;
  }
  // 'm' is a thousandth of a byte: refused as the typo it nearly always is.
  EXPECT_NE(ParseMemoryBytes("512m").status().message().find("Mi or M"), std::string::npos);
}

TEST(QuantityTest, DurationsLikeGoAndArgo) {
  EXPECT_EQ(ParseDuration("30m").value(), milliseconds(30 * 60000));
  EXPECT_EQ(ParseDuration("1h30m").value(), milliseconds(90 * 60000));
  EXPECT_EQ(ParseDuration("10s").value(), milliseconds(10000));
  EXPECT_EQ(ParseDuration("250ms").value(), milliseconds(250));
  EXPECT_EQ(ParseDuration("1.5s").value(), milliseconds(1500));
  EXPECT_EQ(ParseDuration("2d").value(), milliseconds(2 * 86400000));
  EXPECT_EQ(ParseDuration("45").value(), milliseconds(45000));
  for (const char* bad : {"", "m", "10x", "1h-5m", "soon", "5 s"}) {
    EXPECT_STATUS(ParseDuration(bad), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(QuantityTest, FormatsReadBack) {
  EXPECT_EQ(FormatCpu(2000), "2");
  EXPECT_EQ(FormatCpu(500), "0.5");
  EXPECT_EQ(FormatCpu(250), "250m");
  EXPECT_EQ(FormatMemory(int64_t{8} << 30), "8Gi");
  EXPECT_EQ(FormatMemory(int64_t{3} << 29), "1.5Gi");
  EXPECT_EQ(FormatMemory(int64_t{512} << 20), "512Mi");
  EXPECT_EQ(FormatMemory(1000), "1000");
  EXPECT_EQ(FormatDuration(milliseconds(90 * 60000)), "1h30m");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  for (int64_t m : {1, 999, 1000, 1500, 64000}) {
    EXPECT_EQ(ParseCpuMillicores(FormatCpu(m)).value(), m);
  }
  for (int64_t b : {int64_t{1}, int64_t{1} << 20, int64_t{5} << 29, int64_t{123456789}}) {
    EXPECT_EQ(ParseMemoryBytes(FormatMemory(b)).value(), b);
  }
  for (int64_t ms : {1, 1000, 3723004}) {
    EXPECT_EQ(ParseDuration(FormatDuration(milliseconds(ms))).value(), milliseconds(ms));
  }
}

TEST(QuantityTest, CpuListsAsLinuxWritesThem) {
  ASSERT_OK_AND_ASSIGN(std::vector<int> cores, ParseCpuList("4,0-2"));
  EXPECT_EQ(cores, (std::vector<int>{0, 1, 2, 4}));
  EXPECT_EQ(FormatCpuList(cores), "0-2,4");
  ASSERT_OK_AND_ASSIGN(cores, ParseCpuList(""));
  EXPECT_TRUE(cores.empty());
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_STATUS(ParseCpuList("3-1"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(ParseCpuList("0,0"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(ParseCpuList("a"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(ParseCpuList("1,"), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel
