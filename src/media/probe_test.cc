// Probe: facts of particular shared videos (start times, edit lists, rotation, AVI without pts,
// stream choice), header-only probing, the frame table helpers, and every error a caller can get.
#include "media/probe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "media/testing/media_testing.h"
#include "testing/status_matchers.h"

namespace reel::media {
namespace {

using testing::ReadFileOrEmpty;
using testing::SharedVideo;

VideoInfo MustProbe(const std::string& file, const ProbeOptions& options = {}) {
  auto info = Probe(Input::File(SharedVideo(file)), options);
  EXPECT_OK(info);
  return info.ok() ? *info : VideoInfo{};
}

TEST(ProbeTest, OrdinaryMp4) {
  VideoInfo info = MustProbe("mmaction2_test.mp4");
  EXPECT_EQ(info.container, "mov,mp4,m4a,3gp,3g2,mj2");
  EXPECT_EQ(info.codec, "h264");
  EXPECT_EQ(info.pixel_format, "yuv420p");
  EXPECT_EQ(info.width, 340);
  EXPECT_EQ(info.height, 256);
  EXPECT_EQ(info.rotation, 0);
  EXPECT_FALSE(info.mirrored);
  EXPECT_EQ(info.frame_count, 300);
  EXPECT_EQ(info.container_frame_count, 300);
  EXPECT_EQ(info.frame_rate.num, 30);
  EXPECT_EQ(info.frame_rate.den, 1);
  EXPECT_FALSE(info.variable_frame_rate);
  EXPECT_DOUBLE_EQ(info.start_time_s, 0.0);
  EXPECT_NEAR(info.duration_s, 10.0, 1e-9);
  EXPECT_FALSE(info.has_audio);
  EXPECT_TRUE(info.has_presentation_timestamps);
  EXPECT_EQ(info.keyframes, (std::vector<int64_t>{0, 235}));
  EXPECT_EQ(info.sample_aspect_ratio.num, 1024);
  EXPECT_EQ(info.sample_aspect_ratio.den, 765);
  EXPECT_EQ(info.time_base.den, 15360);
  ASSERT_EQ(info.frame_pts.size(), 300u);
  EXPECT_NEAR(info.FrameTime(30), 1.0, 1e-9);
}

TEST(ProbeTest, NonZeroStartTime) {
  VideoInfo info = MustProbe("torchcodec_test_non_zero_start.mp4");
  EXPECT_EQ(info.frame_count, 12);
  EXPECT_NEAR(info.start_time_s, 8.333, 1e-3);
  EXPECT_NEAR(info.duration_s, 0.4, 1e-9);
  EXPECT_DOUBLE_EQ(info.FrameTime(0), 0.0);  // times count from the first frame
  EXPECT_NEAR(info.FrameTime(11), 11.0 / 30, 1e-9);
  EXPECT_EQ(info.NearestFrame(0.0), 0);
}

TEST(ProbeTest, EditListThatDiscardsTheFirstKeyframe) {
  VideoInfo info = MustProbe("torchcodec_discard_first_keyframe.mp4");
  EXPECT_EQ(info.container_frame_count, 30);  // packets, including five never shown
  EXPECT_EQ(info.frame_count, 25);            // what ffprobe -count_frames decodes
  EXPECT_EQ(info.frame_pts.front(), 0);
  // The first shown frame is not a keyframe: its keyframe was cut by the edit list.
  EXPECT_EQ(info.keyframes, (std::vector<int64_t>{5, 15}));
  EXPECT_NEAR(info.duration_s, 1.0, 1e-9);
}

TEST(ProbeTest, BFramesStoredOutOfOrder) {
  VideoInfo info = MustProbe("decord_unordered.mov");
  EXPECT_EQ(info.frame_count, 4);
  EXPECT_EQ(info.frame_pts, (std::vector<int64_t>{0, 512, 1024, 1536}));
  EXPECT_EQ(info.keyframes, (std::vector<int64_t>{0}));
}

TEST(ProbeTest, RotationFromTheDisplayMatrix) {
  VideoInfo v90 = MustProbe("decord_video_90.mov");  // ffprobe: rotation -90 (counter-clockwise)
  EXPECT_EQ(v90.rotation, 90);
  EXPECT_EQ(v90.width, 568);
  EXPECT_EQ(v90.height, 320);
  EXPECT_EQ(v90.display_width, 320);
  EXPECT_EQ(v90.display_height, 568);
  VideoInfo nasa = MustProbe("torchcodec_nasa_13013_rotated.mp4");  // ffprobe: rotation 90
  EXPECT_EQ(nasa.rotation, 270);
  EXPECT_EQ(nasa.display_width, 270);
  EXPECT_EQ(nasa.display_height, 480);
  VideoInfo v0 = MustProbe("decord_video_0.mov");
  EXPECT_EQ(v0.rotation, 0);
  EXPECT_EQ(v0.display_width, 568);
}

TEST(ProbeTest, AviWithoutPresentationTimestamps) {
  VideoInfo info = MustProbe("mmaction2_S001C001P001R001A001_rgb.avi");
  EXPECT_EQ(info.container, "avi");
  EXPECT_FALSE(info.has_presentation_timestamps);
  EXPECT_EQ(info.frame_count, 103);
  EXPECT_NEAR(info.duration_s, 103.0 / 30, 1e-9);
  EXPECT_NEAR(info.FrameTime(30), 1.0, 1e-9);
}

TEST(ProbeTest, MatroskaCountsFramesByScanning) {
  VideoInfo info = MustProbe("decord_flipping_a_pancake.mkv");
  EXPECT_EQ(info.container_frame_count, -1);
  EXPECT_EQ(info.frame_count, 310);
  EXPECT_TRUE(info.has_audio);
  EXPECT_EQ(info.keyframes, (std::vector<int64_t>{0, 150, 300}));
  EXPECT_NEAR(info.frame_rate.value(), 30.0, 1e-9);
  EXPECT_FALSE(info.variable_frame_rate);  // 33/34 ms steps in a 1 ms time base are not VFR
}

TEST(ProbeTest, VariableFrameRate) {
  VideoInfo info = MustProbe("mmaction2_demo_skeleton.mp4");  // avg 28.05 fps, r 30 fps
  EXPECT_TRUE(info.variable_frame_rate);
  EXPECT_NEAR(info.frame_rate.value(), 2160.0 / 77, 1e-9);
}

TEST(ProbeTest, PicksTheBestVideoStreamLikeFfmpegOrTheOneAskedFor) {
  // Two video streams: FFmpeg's choice (and `ffmpeg -i`'s) is the larger one, stream 3.
  VideoInfo best = MustProbe("torchcodec_nasa_13013.mp4");
  EXPECT_EQ(best.stream_index, 3);
  EXPECT_EQ(best.width, 480);
  EXPECT_EQ(best.frame_count, 390);
  EXPECT_TRUE(best.has_audio);
  ProbeOptions first;
  first.stream_index = 0;
  VideoInfo v0 = MustProbe("torchcodec_nasa_13013.mp4", first);
  EXPECT_EQ(v0.stream_index, 0);
  EXPECT_EQ(v0.width, 320);
  EXPECT_EQ(v0.height, 180);
  EXPECT_EQ(v0.frame_count, 325);
  ProbeOptions audio;
  audio.stream_index = 1;
  auto bad = Probe(Input::File(SharedVideo("torchcodec_nasa_13013.mp4")), audio);
  EXPECT_STATUS(bad, StatusCode::kInvalidArgument);
  audio.stream_index = 99;
  bad = Probe(Input::File(SharedVideo("torchcodec_nasa_13013.mp4")), audio);
  EXPECT_STATUS(bad, StatusCode::kInvalidArgument);
}

TEST(ProbeTest, HeaderOnly) {
  ProbeOptions options;
  options.scan_packets = false;
  VideoInfo mp4 = MustProbe("mmaction2_test.mp4", options);
  EXPECT_FALSE(mp4.scanned);
  EXPECT_EQ(mp4.frame_count, 300);
  EXPECT_TRUE(mp4.keyframes.empty());
  EXPECT_TRUE(mp4.frame_pts.empty());
  EXPECT_NEAR(mp4.duration_s, 10.0, 1e-9);
  VideoInfo mkv = MustProbe("decord_flipping_a_pancake.mkv", options);
  EXPECT_EQ(mkv.frame_count, -1);
  EXPECT_GT(mkv.duration_s, 10.0);
  EXPECT_EQ(mkv.NearestFrame(0.0), -1);  // no table
}

TEST(ProbeTest, NearestFrame) {
  VideoInfo info = MustProbe("mmaction2_test.mp4");  // 30 fps, 300 frames
  EXPECT_EQ(info.NearestFrame(0.0), 0);
  EXPECT_EQ(info.NearestFrame(1.0), 30);
  EXPECT_EQ(info.NearestFrame(1.0 / 60 - 1e-6), 0);
  EXPECT_EQ(info.NearestFrame(1.0 / 60 + 1e-6), 1);
  EXPECT_EQ(info.NearestFrame(9.99), 299);
  EXPECT_EQ(info.NearestFrame(10.0), 299);
  EXPECT_EQ(info.NearestFrame(10.01), -1);
  EXPECT_EQ(info.NearestFrame(-0.01), -1);
  EXPECT_EQ(info.NearestFrame(NAN), -1);
}

TEST(ProbeTest, MemoryInputsBehaveLikeFiles) {
  std::string bytes = ReadFileOrEmpty(SharedVideo("decord_flipping_a_pancake.mkv"));
  ASSERT_FALSE(bytes.empty());
  auto shared = Probe(Input::Memory(bytes, "raw/pancake.mkv"));
  ASSERT_OK(shared);
  EXPECT_EQ(shared->frame_count, 310);
  EXPECT_EQ(shared->name, "raw/pancake.mkv");
  auto view = Probe(Input::View(bytes));  // no name: the container is recognised by content
  ASSERT_OK(view);
  EXPECT_EQ(view->frame_pts, shared->frame_pts);
  EXPECT_EQ(view->name, "memory");
}

TEST(ProbeErrorsTest, MissingFileIsNotFound) {
  auto info = Probe(Input::File("/nonexistent/clip.mp4"));
  EXPECT_STATUS(info, StatusCode::kNotFound);
  EXPECT_NE(info.status().message().find("/nonexistent/clip.mp4"), std::string::npos);
}

TEST(ProbeErrorsTest, BytesThatAreNoVideoAreDataLoss) {
  auto garbage = Probe(Input::Memory(std::string(4096, '\x5a'), "garbage.bin"));
  EXPECT_STATUS(garbage, StatusCode::kDataLoss) << garbage.status().ToString();
  EXPECT_NE(garbage.status().message().find("garbage.bin"), std::string::npos);
  auto empty = Probe(Input::Memory(std::string(), "empty.mp4"));
  EXPECT_STATUS(empty, StatusCode::kDataLoss) << empty.status().ToString();
}

TEST(ProbeErrorsTest, TruncatedMp4WithoutItsIndexIsDataLoss) {
  // mmaction2_test.mp4 keeps its moov atom at the end; the first half has no index.
  std::string bytes = ReadFileOrEmpty(SharedVideo("mmaction2_test.mp4"));
  ASSERT_FALSE(bytes.empty());
  auto info = Probe(Input::Memory(bytes.substr(0, bytes.size() / 2), "half.mp4"));
  EXPECT_STATUS(info, StatusCode::kDataLoss) << info.status().ToString();
}

TEST(ProbeErrorsTest, AudioOnlyIsInvalidArgument) {
  // A 0.1 s mono 8 kHz PCM WAV file.
  std::string pcm(800 * 2, '\0');
  auto le32 = [](uint32_t v) {
    std::string s(4, '\0');
    for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
  };
  auto le16 = [](uint16_t v) {
    return std::string{static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
  };
  std::string wav = "RIFF" + le32(36 + static_cast<uint32_t>(pcm.size())) + "WAVE" + "fmt " +
                    le32(16) + le16(1) + le16(1) + le32(8000) + le32(16000) + le16(2) + le16(16) +
                    "data" + le32(static_cast<uint32_t>(pcm.size())) + pcm;
  auto info = Probe(Input::Memory(wav, "tone.wav"));
  EXPECT_STATUS(info, StatusCode::kInvalidArgument) << info.status().ToString();
  EXPECT_NE(info.status().message().find("no video stream"), std::string::npos);
}

}  // namespace
}  // namespace reel::media
