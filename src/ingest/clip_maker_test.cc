// CutClips: overlapping clips (a clip stride shorter than a clip's span, as the main job cuts)
// give the frames a fresh decode of each clip gives, in clip order. MakeClips' video mode: the
// stored clips hold the source's colours, whatever its colour matrix and range.
#include "ingest/clip_maker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "media/decoder.h"
#include "media/encoder.h"
#include "media/scaler.h"
#include "media/testing/media_testing.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::ingest {
namespace {

TEST(CutClipsTest, OverlappingClipsGetTheFramesAFreshDecodeGives) {
  const std::string path = testing::SourcePath("testdata/videos/mmaction2_test.mp4");
  ClipSettings clip;
  clip.clip_frames = 8;
  clip.frame_stride = 3;
  clip.clip_stride = 12;  // each clip shares half its frames with the one before
  clip.short_side = 64;
  std::vector<PlannedClip> planned;
  std::vector<std::vector<media::Frame>> cut;
  const auto sink = [&](const CutVideo&, const PlannedClip& p,
                        const std::vector<media::Frame>& frames) {
    planned.push_back(p);
    cut.push_back(frames);
    return Status::Ok();
  };
  ASSERT_OK(CutClips(media::Input::File(path), -1, -1, clip, sink));
  ASSERT_GT(planned.size(), 20u);  // 300 frames

  media::DecodeOptions options;
  options.format = media::PixelFormat::kRgb24;
  options.short_side = clip.short_side;
  int shared = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    SCOPED_TRACE(i);
    if (i > 0) {
      const std::set<int64_t> before(planned[i - 1].frames.begin(), planned[i - 1].frames.end());
      shared += static_cast<int>(std::count_if(planned[i].frames.begin(), planned[i].frames.end(),
                                               [&](int64_t f) { return before.count(f) > 0; }));
    }
    auto fresh = media::VideoDecoder::Open(media::Input::File(path), options);
    ASSERT_OK(fresh);
    auto frames = (*fresh)->DecodeFrames(planned[i].frames);
    ASSERT_OK(frames);
    ASSERT_EQ(cut[i].size(), frames->size());
    for (size_t k = 0; k < frames->size(); ++k) {
      EXPECT_EQ(cut[i][k].index, planned[i].frames[k]);
      EXPECT_EQ(cut[i][k].data, (*frames)[k].data) << "frame " << planned[i].frames[k];
    }
  }
  EXPECT_GT(shared, 0) << "the clips should overlap";
}

// A video shorter than a clip: the clip repeats the last frame, and every repeat holds it.
TEST(CutClipsTest, APaddedClipRepeatsItsLastFrame) {
  const std::string path = testing::SourcePath("testdata/videos/decord_unordered.mov");  // 4
  ClipSettings clip;
  clip.clip_frames = 8;
  clip.short_side = 32;
  std::vector<PlannedClip> planned;
  std::vector<std::vector<media::Frame>> cut;
  ASSERT_OK(
      CutClips(media::Input::File(path), -1, -1, clip,
               [&](const CutVideo&, const PlannedClip& p, const std::vector<media::Frame>& f) {
                 planned.push_back(p);
                 cut.push_back(f);
                 return Status::Ok();
               }));
  ASSERT_EQ(planned.size(), 1u);
  ASSERT_TRUE(planned[0].padded);
  media::DecodeOptions options;
  options.short_side = clip.short_side;
  auto fresh = media::VideoDecoder::Open(media::Input::File(path), options);
  ASSERT_OK(fresh);
  auto frames = (*fresh)->DecodeFrames(planned[0].frames);
  ASSERT_OK(frames);
  ASSERT_EQ(cut[0].size(), 8u);
  for (size_t k = 0; k < frames->size(); ++k) {
    EXPECT_EQ(cut[0][k].index, planned[0].frames[k]);
    EXPECT_EQ(cut[0][k].data, (*frames)[k].data) << "frame " << k;
  }
}

// The clips' frames, decoded to RGB, without the column and row that pad an odd size to even.
std::vector<std::vector<media::Frame>> DecodeClips(const std::vector<std::string>& payloads,
                                                   int width, int height) {
  std::vector<std::vector<media::Frame>> clips;
  for (const std::string& payload : payloads) {
    auto decoder = media::VideoDecoder::Open(media::Input::View(payload, "clip.mp4"));
    EXPECT_OK(decoder);
    if (!decoder.ok()) return {};
    std::vector<media::Frame> frames;
    EXPECT_OK((*decoder)->ForEachFrame([&](media::Frame&& f) {
      REEL_ASSIGN_OR_RETURN(media::Frame cropped, media::Crop(f, 0, 0, width, height));
      frames.push_back(std::move(cropped));
      return Status::Ok();
    }));
    clips.push_back(std::move(frames));
  }
  return clips;
}

// Mean absolute difference over all the clips' frames.
double MeanError(const std::vector<std::vector<media::Frame>>& a,
                 const std::vector<std::vector<media::Frame>>& b) {
  double sum = 0;
  int n = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t c = 0; c < std::min(a.size(), b.size()); ++c) {
    EXPECT_EQ(a[c].size(), b[c].size());
    for (size_t f = 0; f < std::min(a[c].size(), b[c].size()); ++f) {
      sum += media::testing::Compare(a[c][f], b[c][f]).mean_abs;
      ++n;
    }
  }
  return n > 0 ? sum / n : 255;
}

// Video mode resizes in YUV and hands x264 those frames with their colour matrix and range, where
// it used to convert to RGB, resize, and convert back. Decoded to RGB, the stored clips must be
// about as close to the cut's RGB frames as clips encoded from those RGB frames (the old way)
// are: within 1.12x on the shared videos (swscale resizes their chroma planes as they are, where
// the old way filtered full-resolution RGB), 0.25-0.7x on the full-range one. Stored as BT.601,
// the colourful BT.709 clip (AV1) comes out 1.9x further off; frames whose colour the encoder
// was not given are refused.
TEST(MakeClipsTest, VideoModeKeepsTheSourceColours) {
  struct Case {
    std::string name, bytes;
    int short_side = 112;
  };
  std::vector<Case> cases;
  for (const char* file : {"torchcodec_nasa_13013.mp4", "torchcodec_av1_video.mkv",
                           "torchcodec_testsrc2.mp4", "mmaction2_demo.mp4"}) {
    cases.push_back({file, media::testing::ReadFileOrEmpty(media::testing::SharedVideo(file))});
  }
  auto full_range = media::testing::FullRangeBt709Video(160, 120, 16);
  ASSERT_OK(full_range);
  // Resized (swscale writes limited range), and at its own size (its full-range frames as they
  // are).
  cases.push_back({"full-range BT.709", *full_range});
  cases.push_back({"full-range BT.709, not resized", *full_range, 120});
  ClipSettings clip;
  clip.clip_frames = 8;
  clip.max_clips_per_video = 2;
  const EncodeSettings encode;  // video mode, x264 veryfast, crf 23
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    clip.short_side = c.short_side;
    ASSERT_FALSE(c.bytes.empty());
    const media::Input input = media::Input::View(c.bytes, c.name);
    SourceVideo video;
    video.label = 0;
    ClipJob job;
    job.video = &video;
    job.key_base = "v";
    auto records = MakeClips(job, input, clip, encode);
    ASSERT_OK(records);
    std::vector<std::string> stored;
    for (const dataset::Record& r : *records) stored.push_back(r.payload);

    // The cut's RGB frames, and the same frames encoded as RGB.
    std::vector<std::vector<media::Frame>> cut;
    std::vector<std::string> through_rgb;
    const auto sink = [&](const CutVideo& v, const PlannedClip&,
                          const std::vector<media::Frame>& frames) -> Status {
      cut.push_back(frames);
      media::EncoderOptions options;
      options.width = v.width;
      options.height = v.height;
      options.gop = clip.clip_frames;
      REEL_ASSIGN_OR_RETURN(auto encoder, media::VideoEncoder::Create(options));
      for (const media::Frame& f : frames) REEL_RETURN_IF_ERROR(encoder->Add(f));
      REEL_ASSIGN_OR_RETURN(std::string bytes, encoder->Finish());
      through_rgb.push_back(std::move(bytes));
      return Status::Ok();
    };
    ASSERT_OK(CutClips(input, -1, -1, clip, sink));
    ASSERT_FALSE(cut.empty());
    const int width = cut[0][0].width, height = cut[0][0].height;
    const double direct = MeanError(DecodeClips(stored, width, height), cut);
    const double via_rgb = MeanError(DecodeClips(through_rgb, width, height), cut);
    EXPECT_LE(direct, via_rgb * 1.2) << "stored clips against the cut's RGB frames";
    RecordProperty(c.name + " mean error x1000 (direct, via RGB)",
                   std::to_string(static_cast<int>(direct * 1000)) + ", " +
                       std::to_string(static_cast<int>(via_rgb * 1000)));
  }
}

}  // namespace
}  // namespace reel::ingest
