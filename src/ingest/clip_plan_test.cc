#include "ingest/clip_plan.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::ingest {
namespace {

std::vector<double> Times(int n, double fps, double offset = 0) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) t.push_back(offset + i / fps);
  return t;
}

TEST(ClipPlanTest, NonOverlappingClipsAtTheSourceRate) {
  ClipSettings s;
  s.clip_frames = 4;
  auto clips = PlanClips(Times(10, 25), -1, -1, s);
  ASSERT_EQ(clips.size(), 2u);  // frames 0-3 and 4-7; 8-9 do not make a clip
  EXPECT_EQ(clips[0].frames, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(clips[1].frames, (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(clips[1].index, 1);
  EXPECT_DOUBLE_EQ(clips[1].start_s, 4 / 25.0);
  EXPECT_DOUBLE_EQ(clips[1].end_s, 8 / 25.0);
  EXPECT_FALSE(clips[0].padded);
}

TEST(ClipPlanTest, FrameStrideAndOverlappingClipStride) {
  ClipSettings s;
  s.clip_frames = 3;
  s.frame_stride = 2;
  s.clip_stride = 1;
  auto clips = PlanClips(Times(7, 30), -1, -1, s);
  ASSERT_EQ(clips.size(), 3u);  // spans of 5 samples starting at 0, 1, 2
  EXPECT_EQ(clips[0].frames, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(clips[2].frames, (std::vector<int64_t>{2, 4, 6}));
}

TEST(ClipPlanTest, ResamplingTo10FpsFromA30FpsVideoPicksNearestFrames) {
  ClipSettings s;
  s.clip_frames = 5;
  s.fps = 10;
  auto clips = PlanClips(Times(60, 30, /*offset=*/8.3), -1, -1, s);  // 2 s starting at 8.3 s
  ASSERT_EQ(clips.size(), 4u);
  EXPECT_EQ(clips[0].frames, (std::vector<int64_t>{0, 3, 6, 9, 12}));
  EXPECT_NEAR(clips[0].start_s, 8.3, 1e-9);
  EXPECT_NEAR(clips[0].end_s, 8.8, 1e-9);
}

TEST(ClipPlanTest, SegmentLimitsClips) {
  ClipSettings s;
  s.clip_frames = 5;
  auto clips = PlanClips(Times(100, 10), 2.0, 4.0, s);  // frames 20..39
  ASSERT_EQ(clips.size(), 4u);
  EXPECT_EQ(clips[0].frames.front(), 20);
  EXPECT_EQ(clips[3].frames.back(), 39);
}

TEST(ClipPlanTest, ShortVideoGivesOnePaddedClip) {
  ClipSettings s;
  s.clip_frames = 8;
  auto clips = PlanClips(Times(3, 30), -1, -1, s);
  ASSERT_EQ(clips.size(), 1u);
  EXPECT_TRUE(clips[0].padded);
  EXPECT_EQ(clips[0].frames, (std::vector<int64_t>{0, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_TRUE(PlanClips({}, -1, -1, s).empty());
}

TEST(ClipPlanTest, MaxClipsSpreadsEvenlyIncludingBothEnds) {
  ClipSettings s;
  s.clip_frames = 2;
  s.max_clips_per_video = 3;
  auto clips = PlanClips(Times(20, 25), -1, -1, s);  // 10 possible clips
  ASSERT_EQ(clips.size(), 3u);
  EXPECT_EQ(clips[0].frames.front(), 0);
  EXPECT_EQ(clips[1].frames.front(), 10);
  EXPECT_EQ(clips[2].frames.front(), 18);
}

TEST(ClipPlanTest, SettingsAreValidated) {
  ClipSettings s;
  EXPECT_OK(ValidateClipSettings(s));
  s.clip_frames = 0;
  EXPECT_STATUS(ValidateClipSettings(s), StatusCode::kInvalidArgument);
  s = ClipSettings{};
  s.fps = -1;
  EXPECT_STATUS(ValidateClipSettings(s), StatusCode::kInvalidArgument);
  s = ClipSettings{};
  s.short_side = 1;
  EXPECT_STATUS(ValidateClipSettings(s), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::ingest
