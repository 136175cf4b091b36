#include "console/runs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::console {
namespace {

using ::testing::ElementsAre;

void Append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

std::string StepLine(int step, double loss, double time) {
  return R"({"step":)" + std::to_string(step) + R"(,"epoch":0,"loss":)" + std::to_string(loss) +
         R"(,"lr":0.1,"clips_per_s":50,"input_wait_share":0.25,"time":)" + std::to_string(time) +
         "}\n";
}

TEST(RunReaderTest, ReadsStepsEvaluationsAndCheckpointsThenOnlyWhatWasAppended) {
  testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  std::filesystem::create_directories(run);
  Append(run + "/metrics.jsonl", StepLine(10, 2.5, 1000) + StepLine(20, 2.0, 1004));
  Append(
      run + "/metrics.jsonl",
      R"({"event":"checkpoint","step":20,"seconds":0.5,"time":1005})"
      "\n"
      R"({"event":"eval","epoch":0,"top1":0.5,"top5":1,"predictions":[{"video":"a"}],"time":1006})"
      "\n");
  RunReader reader;
  ASSERT_OK_AND_ASSIGN(auto first, reader.Read(run));
  EXPECT_THAT(first->series.step, ElementsAre(10, 20));
  EXPECT_THAT(first->series.loss, ElementsAre(2.5, 2.0));
  EXPECT_THAT(first->series.wall_s, ElementsAre(0, 4));
  ASSERT_EQ(first->evals.size(), 1u);
  EXPECT_EQ(first->evals[0].step, 20);  // the step it followed
  EXPECT_DOUBLE_EQ(first->evals[0].top1, 0.5);
  ASSERT_EQ(first->checkpoints.size(), 1u);
  EXPECT_EQ(first->checkpoints[0].step, 20);

  // A half-written line waits; a malformed one is counted and skipped; the snapshot a caller
  // holds does not change under it.
  Append(run + "/metrics.jsonl", "{not json}\n" + StepLine(30, 1.5, 1010) + R"({"step":40,)");
  ASSERT_OK_AND_ASSIGN(auto second, reader.Read(run));
  EXPECT_THAT(second->series.step, ElementsAre(10, 20, 30));
  EXPECT_EQ(second->malformed, 1);
  EXPECT_EQ(first->series.size(), 2u);
  Append(run + "/metrics.jsonl", R"("loss":1.0,"time":1012})"
                                 "\n");
  ASSERT_OK_AND_ASSIGN(auto third, reader.Read(run));
  EXPECT_THAT(third->series.step, ElementsAre(10, 20, 30, 40));

  ASSERT_OK_AND_ASSIGN(nlohmann::json report, RunReader::ReadEvalLine(run, third->evals[0]));
  EXPECT_EQ(report["predictions"][0]["video"], "a");
}

TEST(RunReaderTest, LinesWithoutTimeHaveNoWallTimeAndAMissingRunIsNotFound) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/old");
  Append(dir.path() + "/old/metrics.jsonl", R"({"step":1,"loss":1})"
                                            "\n");
  RunReader reader;
  ASSERT_OK_AND_ASSIGN(auto data, reader.Read(dir.path() + "/old"));
  EXPECT_TRUE(std::isnan(data->series.wall_s[0]));
  EXPECT_TRUE(std::isnan(data->series.lr[0]));
  EXPECT_STATUS(reader.Read(dir.path() + "/none").status(), StatusCode::kNotFound);
}

TEST(RunReaderTest, ARewrittenFileIsReadAgainFromTheStart) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  Append(path, StepLine(1, 1, 1) + StepLine(2, 1, 2));
  RunReader reader;
  ASSERT_OK(reader.Read(dir.path()).status());
  std::filesystem::remove(path);
  Append(path, StepLine(5, 3, 9));
  ASSERT_OK_AND_ASSIGN(auto data, reader.Read(dir.path()));
  EXPECT_THAT(data->series.step, ElementsAre(5));
}

TEST(FindRunFoldersTest, FindsNestedRunsButNotInsideCheckpoints) {
  testing::TempDir dir;
  for (const char* d : {"a", "group/b", "group/b/checkpoints/step-1",
                        "pipelines/artifacts/main-1/train/run", "x/y/z/w/v/u/too-deep"}) {
    std::filesystem::create_directories(dir.path() + "/" + d);
    Append(dir.path() + "/" + d + "/metrics.jsonl", "");
  }
  ASSERT_OK_AND_ASSIGN(auto found, FindRunFolders(dir.path()));
  EXPECT_THAT(found, ElementsAre(dir.path() + "/a", dir.path() + "/group/b",
                                 dir.path() + "/pipelines/artifacts/main-1/train/run"));
  EXPECT_STATUS(FindRunFolders(dir.path() + "/missing").status(), StatusCode::kNotFound);
}

TEST(ThinIndicesTest, KeepsFirstLastAndEachBucketsExtremes) {
  std::vector<double> loss(1000, 1.0);
  loss[500] = 9.0;  // a spike
  loss[700] = -1.0;
  const std::vector<size_t> kept = ThinIndices(loss, 60);
  EXPECT_LE(kept.size(), 61u);
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), 999u);
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
  EXPECT_NE(std::find(kept.begin(), kept.end(), 500u), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), 700u), kept.end());
  EXPECT_EQ(ThinIndices(loss, 0).size(), 1000u);
  EXPECT_THAT(ThinIndices({1, 2, 3}, 10), ElementsAre(0, 1, 2));
}

}  // namespace
}  // namespace reel::console
