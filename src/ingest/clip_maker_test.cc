// CutClips: overlapping clips (a clip stride shorter than a clip's span, as the main job cuts)
// give the frames a fresh decode of each clip gives, in clip order.
#include "ingest/clip_maker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "media/decoder.h"
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

}  // namespace
}  // namespace reel::ingest
