// Every real-world file in testdata/videos (see its README) is either decoded correctly or
// refused with a clear reason:
//   - probe: codec, frame count (packet scan; ffprobe -count_frames where the container has no
//     count), size after rotation, rotation;
//   - pixels: the decoder's native YUV420P output is bit-exact with `ffmpeg -noautorotate -i F
//     -vf select=eq(n\,K) -pix_fmt yuv420p` for a few frames K per file, and with ffmpeg's own
//     autorotation for rotated files; RGB24 output (autorotated) is within kRgbMaxAbs of ffmpeg's
//     rgb24 (see the comment there);
//   - the same from memory as from the file;
//   - a sequential decode yields every frame once, and random access (forwards and backwards)
//     gives exactly the same pictures, with or without the non-reference frames between
//     requested ones skipped;
//   - decord_corrupted.mp4 is reported as DataLoss, never crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "media/decoder.h"
#include "media/probe.h"
#include "media/testing/media_testing.h"
#include "testing/status_matchers.h"

namespace reel::media {
namespace {

using testing::Compare;
using testing::FfmpegFrames;
using testing::SharedVideo;

// RGB tolerance against the ffmpeg command line. Both convert the same decoded YUV with
// libswscale using the video's colour matrix, so most pixels are identical; differences come only
// from the chroma upsampling path swscale picks (its special unscaled yuv2rgb converters versus
// the general scaler used for odd heights and some formats). Measured on these files: see
// RgbMatchesFfmpeg. A wrong matrix (BT.601 vs BT.709) or range gives differences of 10-40 and
// fails; a wrong frame fails by far.
constexpr int kRgbMaxAbs = 2;
constexpr double kRgbMeanAbs = 0.5;

struct VideoCase {
  const char* file;
  const char* codec;
  int64_t frames;     // what a full decode yields (ffprobe -count_frames)
  int display_width;  // after rotation
  int display_height;
  int rotation;  // clockwise degrees
  bool corrupt = false;
};

std::ostream& operator<<(std::ostream& os, const VideoCase& c) { return os << c.file; }

const VideoCase kCases[] = {
    {"decord_corrupted.mp4", "h264", 50, 1280, 720, 0, /*corrupt=*/true},
    {"decord_flipping_a_pancake.mkv", "h264", 310, 426, 240, 0},
    {"decord_unordered.mov", "h264", 4, 50, 50, 0},
    {"decord_video_0.mov", "h264", 3, 568, 320, 0},
    {"decord_video_90.mov", "h264", 3, 320, 568, 90},
    {"mmaction2_S001C001P001R001A001_rgb.avi", "h264", 103, 1920, 1080, 0},
    {"mmaction2_demo.mp4", "h264", 280, 340, 256, 0},
    {"mmaction2_demo_skeleton.mp4", "h264", 72, 1920, 1080, 0},
    {"mmaction2_demo_spatiotemporal_det.mp4", "h264", 57, 340, 256, 0},
    {"mmaction2_rawvideo_dataset_part_0.mp4", "h264", 32, 340, 256, 0},
    {"mmaction2_test.avi", "mpeg4", 164, 320, 240, 0},
    {"mmaction2_test.mp4", "h264", 300, 340, 256, 0},
    {"mmaction2_test_video_structuralize.mp4", "h264", 300, 426, 240, 0},
    {"torchcodec_av1_video.mkv", "av1", 125, 640, 360, 0},
    {"torchcodec_discard_first_keyframe.mp4", "h264", 25, 64, 64, 0},
    {"torchcodec_h265_video.mp4", "hevc", 10, 128, 128, 0},
    {"torchcodec_nasa_13013.mp4", "h264", 390, 480, 270, 0},
    {"torchcodec_nasa_13013_rotated.mp4", "h264", 17, 270, 480, 270},
    {"torchcodec_test_non_zero_start.mp4", "h264", 12, 200, 112, 0},
    {"torchcodec_testsrc2.mp4", "h264", 60, 1280, 720, 0},
    {"torchcodec_testsrc2_mpeg4.avi", "mpeg4", 30, 1280, 720, 0},
    {"torchcodec_testsrc2_vp9.webm", "vp9", 30, 1280, 720, 0},
};

class SharedVideoTest : public ::testing::TestWithParam<VideoCase> {
 protected:
  void SetUp() override {
    path_ = SharedVideo(GetParam().file);
    ASSERT_FALSE(testing::ReadFileOrEmpty(path_).empty()) << "missing " << path_;
  }
  std::string path_;
};

TEST_P(SharedVideoTest, ProbeReportsTheFacts) {
  const VideoCase& c = GetParam();
  auto info = Probe(Input::File(path_));
  ASSERT_OK(info);
  EXPECT_EQ(info->codec, c.codec);
  EXPECT_EQ(info->frame_count, c.frames);
  EXPECT_EQ(static_cast<int64_t>(info->frame_pts.size()), c.frames);
  EXPECT_EQ(info->display_width, c.display_width);
  EXPECT_EQ(info->display_height, c.display_height);
  EXPECT_EQ(info->rotation, c.rotation);
  EXPECT_EQ(info->pixel_format, "yuv420p");
  EXPECT_TRUE(info->scanned);
  ASSERT_FALSE(info->keyframes.empty());
  EXPECT_TRUE(std::is_sorted(info->keyframes.begin(), info->keyframes.end()));
  EXPECT_TRUE(std::adjacent_find(info->frame_pts.begin(), info->frame_pts.end(),
                                 [](int64_t a, int64_t b) { return a >= b; }) ==
              info->frame_pts.end())
      << "frame table not strictly increasing";
  EXPECT_GT(info->frame_rate.value(), 1.0);
  EXPECT_GT(info->duration_s, 0.0);
  EXPECT_DOUBLE_EQ(info->FrameTime(0), 0.0);

  // The same from memory (and the name is what errors will carry).
  auto memory = Probe(Input::Memory(testing::ReadFileOrEmpty(path_), c.file));
  ASSERT_OK(memory);
  EXPECT_EQ(memory->frame_pts, info->frame_pts);
  EXPECT_EQ(memory->keyframes, info->keyframes);
  EXPECT_EQ(memory->codec, info->codec);
  EXPECT_EQ(memory->name, c.file);
}

TEST_P(SharedVideoTest, FrameCountMatchesFfprobeWhereTheContainerHasNone) {
  const VideoCase& c = GetParam();
  auto info = Probe(Input::File(path_));
  ASSERT_OK(info);
  if (info->container_frame_count >= 0) {
    // The container's count is the packet count; edit lists may hide some (discarded) packets.
    EXPECT_GE(info->container_frame_count, info->frame_count);
    return;
  }
  if (!testing::HaveFfmpegCli()) GTEST_SKIP() << "no ffmpeg command line";
  auto out =
      testing::RunCommand("ffprobe -v error -select_streams " + std::to_string(info->stream_index) +
                          " -count_frames -show_entries stream=nb_read_frames -of csv=p=0 " +
                          testing::ShellQuote(path_));
  ASSERT_OK(out);
  EXPECT_EQ(std::stoll(*out), c.frames);
}

// A few frames per file: first, middle, last, and the one after the first keyframe interval.
std::vector<int64_t> FramesToCheck(const VideoInfo& info) {
  std::set<int64_t> s = {0, info.frame_count / 2, info.frame_count - 1};
  if (info.keyframes.size() > 1) s.insert(info.keyframes[1]);
  return std::vector<int64_t>(s.begin(), s.end());
}

// Our frames against the ffmpeg command line's, for a few frames of every decodable file: native
// YUV420P without autorotation bit-exact, RGB24 with autorotation within tolerance (decoded from
// memory this time: the custom AVIOContext path), and for rotated files native YUV420P with
// autorotation bit-exact (turning planes is lossless).
TEST_P(SharedVideoTest, DecodesLikeFfmpeg) {
  const VideoCase& c = GetParam();
  if (c.corrupt) return;  // CorruptVideoIsReported
  if (!testing::HaveFfmpegCli()) GTEST_SKIP() << "no ffmpeg command line";

  DecodeOptions native_options;
  native_options.format = PixelFormat::kYuv420p;
  native_options.autorotate = false;
  auto native = VideoDecoder::Open(Input::File(path_), native_options);
  ASSERT_OK(native);
  const VideoInfo& info = (*native)->info();
  std::vector<int64_t> indices = FramesToCheck(info);

  // Without rotation, autorotation changes nothing: one decode in ffmpeg feeds both outputs.
  std::vector<testing::FfmpegOutput> outputs = {
      {PixelFormat::kYuv420p, /*autorotate=*/false, info.width, info.height},
      {PixelFormat::kRgb24, /*autorotate=*/c.rotation != 0, c.display_width, c.display_height}};
  if (c.rotation != 0) {
    outputs.push_back({PixelFormat::kYuv420p, true, c.display_width, c.display_height});
  }
  auto reference = FfmpegFrames(path_, info.stream_index, indices, outputs);
  ASSERT_OK(reference);

  auto ours = (*native)->DecodeFrames(indices);
  ASSERT_OK(ours);
  for (size_t k = 0; k < indices.size(); ++k) {
    const Frame& f = (*ours)[k];
    EXPECT_EQ(f.index, indices[k]);
    EXPECT_EQ(f.width, info.width);
    EXPECT_EQ(f.height, info.height);
    EXPECT_DOUBLE_EQ(f.timestamp_s, info.FrameTime(indices[k]));
    auto d = Compare(f, (*reference)[0][k]);
    EXPECT_EQ(d.max_abs, 0) << "native frame " << indices[k] << " differs from ffmpeg's (mean "
                            << d.mean_abs << ", psnr " << d.psnr << ")";
  }

  auto rgb = VideoDecoder::Open(Input::Memory(testing::ReadFileOrEmpty(path_), c.file));
  ASSERT_OK(rgb);
  ASSERT_EQ((*rgb)->output_width(), c.display_width);
  ASSERT_EQ((*rgb)->output_height(), c.display_height);
  auto rgb_frames = (*rgb)->DecodeFrames(indices);
  ASSERT_OK(rgb_frames);
  for (size_t k = 0; k < indices.size(); ++k) {
    auto d = Compare((*rgb_frames)[k], (*reference)[1][k]);
    EXPECT_LE(d.max_abs, kRgbMaxAbs) << "RGB frame " << indices[k];
    EXPECT_LE(d.mean_abs, kRgbMeanAbs) << "RGB frame " << indices[k];
    RecordProperty("rgb_max_abs_" + std::to_string(indices[k]), d.max_abs);
    RecordProperty("rgb_mean_abs_x1000_" + std::to_string(indices[k]),
                   static_cast<int>(d.mean_abs * 1000));
  }

  if (c.rotation != 0) {
    DecodeOptions rotated_options;
    rotated_options.format = PixelFormat::kYuv420p;
    auto rotated = VideoDecoder::Open(Input::File(path_), rotated_options);
    ASSERT_OK(rotated);
    auto frames = (*rotated)->DecodeFrames(indices);
    ASSERT_OK(frames);
    for (size_t k = 0; k < indices.size(); ++k) {
      EXPECT_EQ((*frames)[k].width, c.display_width);
      EXPECT_EQ(Compare((*frames)[k], (*reference)[2][k]).max_abs, 0)
          << "rotated frame " << indices[k];
    }
  }
}

// A sequential decode yields every frame once, in order, without seeking; random access (sorted
// requests, then single requests going backwards) gives exactly the same pictures. This covers
// seeking in MP4, MOV, Matroska, WebM and AVI, with and without presentation timestamps.
TEST_P(SharedVideoTest, SequentialAndRandomAccessAgree) {
  const VideoCase& c = GetParam();
  if (c.corrupt) return;  // CorruptVideoIsReported
  DecodeOptions options;
  options.format = PixelFormat::kGray8;  // cheap to convert and compare
  options.short_side = 48;
  auto decoder = VideoDecoder::Open(Input::File(path_), options);
  ASSERT_OK(decoder);
  std::vector<Frame> all;
  Status s = (*decoder)->ForEachFrame([&](Frame&& f) {
    EXPECT_EQ(f.index, static_cast<int64_t>(all.size()));
    all.push_back(std::move(f));
    return Status::Ok();
  });
  ASSERT_OK(s);
  ASSERT_EQ(static_cast<int64_t>(all.size()), c.frames);
  DecodeStats stats = (*decoder)->stats();
  EXPECT_EQ(stats.seeks, 0);
  EXPECT_EQ(stats.frames_returned, c.frames);

  const int64_t n = c.frames;
  std::mt19937 rng(1234);
  std::vector<int64_t> request = {n - 1, 0};
  for (int k = 0; k < 5; ++k) request.push_back(static_cast<int64_t>(rng() % n));
  auto random = VideoDecoder::Open(Input::File(path_), options);
  ASSERT_OK(random);
  auto frames = (*random)->DecodeFrames(request);
  ASSERT_OK(frames);
  for (size_t k = 0; k < request.size(); ++k) {
    EXPECT_EQ((*frames)[k].index, request[k]);
    EXPECT_EQ((*frames)[k].data, all[request[k]].data) << "frame " << request[k];
  }
  // Backwards, one at a time: every request needs a seek back.
  std::vector<int64_t> backwards = {n - 1, n / 2, n / 3, 0};
  for (int64_t i : backwards) {
    auto f = (*random)->DecodeFrame(i);
    ASSERT_OK(f);
    EXPECT_EQ(f->data, all[i].data) << "frame " << i << " (going backwards)";
  }
}

// Clips as ingest and the server cut them (every third frame, clip after clip, one DecodeFrames
// each), decoded with and without dropping the non-reference frames between the requested ones:
// the same pictures, on one decoder thread and on two.
TEST_P(SharedVideoTest, SkippingUnrequestedFramesGivesTheSamePictures) {
  const VideoCase& c = GetParam();
  if (c.corrupt) return;
  const auto clips = [&](bool skip, int threads, DecodeStats* stats) {
    DecodeOptions options;
    options.format = PixelFormat::kGray8;
    options.short_side = 48;
    options.threads = threads;
    options.skip_unrequested = skip;
    std::vector<Frame> frames;
    auto decoder = VideoDecoder::Open(Input::File(path_), options);
    EXPECT_OK(decoder);
    if (!decoder.ok()) return frames;
    for (int64_t start = 1; start < c.frames; start += 40) {
      std::vector<int64_t> clip;
      for (int64_t i = start; i < std::min(c.frames, start + 24); i += 3) clip.push_back(i);
      auto decoded = (*decoder)->DecodeFrames(clip);
      EXPECT_OK(decoded) << "clip at " << start << (skip ? ", skipping" : "");
      if (!decoded.ok()) return frames;
      for (Frame& f : *decoded) frames.push_back(std::move(f));
    }
    *stats = (*decoder)->stats();
    return frames;
  };
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    DecodeStats full_stats, skipped_stats;
    const std::vector<Frame> full = clips(false, threads, &full_stats);
    const std::vector<Frame> skipped = clips(true, threads, &skipped_stats);
    ASSERT_EQ(skipped.size(), full.size());
    for (size_t k = 0; k < full.size(); ++k) {
      EXPECT_EQ(skipped[k].index, full[k].index);
      EXPECT_EQ(skipped[k].data, full[k].data) << "frame " << full[k].index;
    }
    // (A frame dropped early no longer fills the reorder delay, so a few more packets may be
    // read to reach the last frame requested.)
    EXPECT_LE(skipped_stats.frames_decoded, full_stats.frames_decoded);
    // mmaction2_demo.mp4 (x264 with B-frames): 108 of its 280 frames are non-reference.
    if (std::string(c.file) == "mmaction2_demo.mp4") {
      EXPECT_LT(skipped_stats.frames_decoded, full_stats.frames_decoded * 3 / 4)
          << skipped_stats.frames_decoded << " of " << full_stats.frames_decoded;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Videos, SharedVideoTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<VideoCase>& info) {
                           std::string name = info.param.file;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// decord_corrupted.mp4: the container is intact, one H.264 packet (frame 30) is not.
TEST(SharedVideoCorruptTest, CorruptVideoIsReported) {
  const VideoCase& c = kCases[0];
  ASSERT_TRUE(c.corrupt);
  const std::string path = SharedVideo(c.file);
  ASSERT_FALSE(testing::ReadFileOrEmpty(path).empty()) << "missing " << path;
  auto decoder = VideoDecoder::Open(Input::File(path));
  ASSERT_OK(decoder);  // the container itself is intact
  // The first frames decode; a full decode stops at the corrupt packet with DataLoss naming it.
  auto first = (*decoder)->DecodeFrame(0);
  ASSERT_OK(first);
  int64_t delivered = 0;
  Status s = (*decoder)->ForEachFrame([&](Frame&&) {
    ++delivered;
    return Status::Ok();
  });
  EXPECT_STATUS(s, StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find(c.file), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("frame 30"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Invalid data"), std::string::npos) << s.message();
  EXPECT_LT(delivered, c.frames);
  // Random access past the damage fails the same way, and the decoder stays usable.
  auto last = (*decoder)->DecodeFrame(c.frames - 1);
  EXPECT_STATUS(last, StatusCode::kDataLoss) << last.status().ToString();
  auto again = (*decoder)->DecodeFrame(1);
  EXPECT_OK(again);

  // Tolerant sequential reading skips what cannot be decoded.
  DecodeOptions tolerant;
  tolerant.skip_corrupt = true;
  tolerant.format = PixelFormat::kGray8;
  auto skipping = VideoDecoder::Open(Input::File(path), tolerant);
  ASSERT_OK(skipping);
  int64_t count = 0;
  s = (*skipping)->ForEachFrame([&](Frame&&) {
    ++count;
    return Status::Ok();
  });
  EXPECT_OK(s);
  EXPECT_EQ(count, 49);  // what ffprobe -count_frames decodes: all but the corrupt frame 30
  EXPECT_GT((*skipping)->stats().corrupt_packets, 0);
}

}  // namespace
}  // namespace reel::media
