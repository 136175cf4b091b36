#include "bench/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace reel::bench {
namespace {

TEST(ReportTest, WritesEveryFigureWithItsRatiosAndNullWhereThereIsNoReference) {
  Report report("demo_bench", 2);
  report.Add({"loader", 900, "clips/s", Reference{1000, "pure decode"}, Reference{100, "PyTorch"}});
  report.Add({"step", 0.5, "s", {}, Reference{2, "torchvision"}});
  const std::string path = ::testing::TempDir() + "/report_" + std::to_string(::getpid()) + ".json";
  ASSERT_EQ(report.Finish(path), 0);
  std::ifstream in(path);
  const nlohmann::json records = nlohmann::json::parse(in);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["bench"], "demo_bench");
  EXPECT_NE(records[0]["machine"].get<std::string>().find("2 threads used"), std::string::npos);
  const nlohmann::json& loader = records[1];
  EXPECT_EQ(loader["name"], "loader");
  EXPECT_EQ(loader["unit"], "clips/s");
  EXPECT_DOUBLE_EQ(loader["limit_ratio"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(loader["peer_ratio"].get<double>(), 9.0);
  EXPECT_EQ(loader["limit_name"], "pure decode");
  const nlohmann::json& step = records[2];
  EXPECT_TRUE(step["limit"].is_null());
  EXPECT_TRUE(step["limit_ratio"].is_null());
  EXPECT_DOUBLE_EQ(step["peer_ratio"].get<double>(), 0.25);  // a time: below 1 is faster
  std::remove(path.c_str());
}

TEST(ReportTest, AnUnwritableFileIsAnError) {
  Report report("demo_bench", 1);
  report.Add({"x", 1, "s", {}, {}});
  EXPECT_EQ(report.Finish("/nonexistent-folder/out.json"), 1);
  EXPECT_EQ(report.Finish(""), 0);  // no file asked for
}

TEST(ReportTest, TakeJsonFlagRemovesTheFlagAndItsValue) {
  std::vector<std::string> words = {"bench", "--threads", "2", "--json", "out.json", "--x"};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  int argc = static_cast<int>(argv.size());
  EXPECT_EQ(TakeJsonFlag(&argc, argv.data()), "out.json");
  ASSERT_EQ(argc, 4);
  EXPECT_STREQ(argv[1], "--threads");
  EXPECT_STREQ(argv[3], "--x");
  EXPECT_EQ(TakeJsonFlag(&argc, argv.data()), "");
  EXPECT_EQ(argc, 4);
}

}  // namespace
}  // namespace reel::bench
