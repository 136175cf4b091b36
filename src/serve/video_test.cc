#include "serve/video.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::serve {
namespace {

std::string ReadTestVideo(const std::string& name) {
  std::ifstream in(reel::testing::SourcePath("testdata/videos/" + name), std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

VideoSettings Small(int clips) {
  VideoSettings s;
  s.ingest.clip_frames = 8;
  s.ingest.short_side = 40;
  s.clip.frames = 4;
  s.clip.stride = 2;
  s.transform.size = 32;
  s.clips = clips;
  return s;
}

TEST(VideoToSamples, CutsEvenlySpreadClipsAsEvaluationSeesThem) {
  const std::string video = ReadTestVideo("mmaction2_test.mp4");
  ASSERT_FALSE(video.empty());
  ASSERT_OK_AND_ASSIGN(VideoSamples samples, VideoToSamples(video, "test.mp4", Small(3)));
  EXPECT_EQ(samples.clips, 3);
  ASSERT_EQ(samples.input.size(), 3u * 3 * 4 * 32 * 32);
  // Normalised pixels: finite, within (0 - mean) / std and (1 - mean) / std.
  for (float v : samples.input) {
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_GT(v, -2.0f);
    ASSERT_LT(v, 2.8f);
  }
  // The clips come from different places in the video.
  const size_t sample = samples.input.size() / 3;
  EXPECT_FALSE(std::equal(samples.input.begin(), samples.input.begin() + sample,
                          samples.input.begin() + 2 * sample));
}

TEST(VideoToSamples, RefusesWhatIsNotVideo) {
  const auto samples = VideoToSamples("this is not a video", "note.txt", Small(1));
  ASSERT_FALSE(samples.ok());
  EXPECT_THAT(samples.status().message(), ::testing::HasSubstr("note.txt"));
  const std::string corrupted = ReadTestVideo("decord_corrupted.mp4");
  EXPECT_FALSE(VideoToSamples(corrupted, "corrupted.mp4", Small(1)).ok());
}

TEST(ApplyManifestClipSettings, ReadsTheIngestClipObject) {
  ingest::ClipSettings settings;
  const nlohmann::json clip_settings = {
      {"clip", {{"clip_frames", 12}, {"frame_stride", 3}, {"fps", 15.0}, {"short_side", 96}}},
      {"encode", {{"mode", "video"}}}};
  ApplyManifestClipSettings(clip_settings, &settings);
  EXPECT_EQ(settings.clip_frames, 12);
  EXPECT_EQ(settings.frame_stride, 3);
  EXPECT_EQ(settings.fps, 15.0);
  EXPECT_EQ(settings.short_side, 96);
  ingest::ClipSettings untouched;
  ApplyManifestClipSettings(nlohmann::json::object(), &untouched);
  EXPECT_EQ(untouched.clip_frames, ingest::ClipSettings().clip_frames);
}

}  // namespace
}  // namespace reel::serve
