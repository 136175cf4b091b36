#include <gtest/gtest.h>

#include <cmath>

#include "testing/status_matchers.h"
#include "train/metrics.h"
#include "train/schedule.h"

namespace reel::train {
namespace {

TEST(ScheduleTest, WarmupThenCosineToTheFloor) {
  ScheduleOptions o;
  o.base_lr = 0.4;
  o.warmup_steps = 4;
  o.total_steps = 104;
  o.min_lr = 0.004;
  ASSERT_OK(ValidateSchedule(o));
  EXPECT_DOUBLE_EQ(LearningRate(o, 0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(o, 3), 0.4);
  EXPECT_DOUBLE_EQ(LearningRate(o, 4), 0.4);                     // cosine starts at the top
  EXPECT_NEAR(LearningRate(o, 54), 0.004 + 0.396 * 0.5, 1e-12);  // half way
  EXPECT_DOUBLE_EQ(LearningRate(o, 104), 0.004);
  EXPECT_DOUBLE_EQ(LearningRate(o, 500), 0.004);
  for (int64_t s = 4; s < 104; ++s) EXPECT_GE(LearningRate(o, s), LearningRate(o, s + 1));
}

TEST(ScheduleTest, BadOptionsAreRefused) {
  ScheduleOptions o;
  o.warmup_steps = 5;
  o.total_steps = 3;
  EXPECT_STATUS(ValidateSchedule(o), StatusCode::kInvalidArgument);
  o = ScheduleOptions{};
  o.base_lr = 0;
  EXPECT_STATUS(ValidateSchedule(o), StatusCode::kInvalidArgument);
  o = ScheduleOptions{};
  o.min_lr = 1.0;
  EXPECT_STATUS(ValidateSchedule(o), StatusCode::kInvalidArgument);
}

TEST(EvaluatorTest, TopKPerClassConfusionAndVideoLevel) {
  Evaluator e(6);
  // Video "a" (label 0): clip 1 wrong (predicts 1), clip 2 right and confident.
  ASSERT_OK(e.Add({0.4f, 0.5f, 0, 0, 0, 0}, 0, "a"));
  ASSERT_OK(e.Add({0.9f, 0.1f, 0, 0, 0, 0}, 0, "a"));
  // Video "b" (label 5): its class ranks 6th of 6 (not in the top 5).
  ASSERT_OK(e.Add({6, 5, 4, 3, 2, 1}, 5, "b"));
  // Video "c" (label 2): third best, inside the top 5.
  ASSERT_OK(e.Add({3, 2, 1, 0, 0, 0}, 2, "c"));
  EvalReport r = e.Report();
  EXPECT_EQ(r.clips, 4);
  EXPECT_DOUBLE_EQ(r.top1, 0.25);
  EXPECT_DOUBLE_EQ(r.top5, 0.75);
  EXPECT_EQ(r.videos, 3);
  EXPECT_NEAR(r.video_top1, 1.0 / 3, 1e-12);  // "a" right once its clips are averaged
  EXPECT_DOUBLE_EQ(r.per_class[0], 0.5);
  EXPECT_EQ(r.per_class_count[0], 2);
  EXPECT_EQ(r.per_class_count[3], 0);
  EXPECT_EQ(r.confusion[0][1], 1);
  EXPECT_EQ(r.confusion[5][0], 1);
  EXPECT_NE(r.ToJson().find("\"video_top1\""), std::string::npos);
  // Per video, by key: "a" right at its clips' mean score, "b" and "c" wrong.
  ASSERT_EQ(r.predictions.size(), 3u);
  EXPECT_EQ(r.predictions[0].video, "a");
  EXPECT_EQ(r.predictions[0].predicted, 0);
  EXPECT_NEAR(r.predictions[0].confidence, (0.4 + 0.9) / 2, 1e-6);  // float scores
  EXPECT_EQ(r.predictions[1].video, "b");
  EXPECT_EQ(r.predictions[1].label, 5);
  EXPECT_EQ(r.predictions[1].predicted, 0);
  EXPECT_NE(r.ToJson().find("{\"confidence\":3.0,\"label\":2,\"predicted\":0,\"video\":\"c\"}"),
            std::string::npos);
  EXPECT_STATUS(e.Add({1, 2}, 0, "x"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(e.Add({1, 2, 3, 4, 5, 6}, 6, "x"), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::train
