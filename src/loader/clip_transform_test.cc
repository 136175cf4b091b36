#include "loader/clip_transform.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::loader {
namespace {

// T frames of W x H whose pixel (x, y) of frame t is (x, y, t).
FrameStack Ramp(int t, int h, int w) {
  FrameStack s;
  s.t = t;
  s.h = h;
  s.w = w;
  for (int f = 0; f < t; ++f)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        s.pixels.push_back(static_cast<char>(x));
        s.pixels.push_back(static_cast<char>(y));
        s.pixels.push_back(static_cast<char>(f));
      }
  return s;
}

TEST(ClipStartsTest, ModesAndMultiClip) {
  Rng rng(1);
  ClipOptions c;
  c.frames = 4;
  c.stride = 2;  // span 7
  c.sampling = ClipSampling::kCenter;
  EXPECT_EQ(ClipStarts(17, c, rng).value(), std::vector<int>{5});
  c.sampling = ClipSampling::kRandom;
  for (int i = 0; i < 50; ++i) {
    int s = ClipStarts(17, c, rng).value()[0];
    EXPECT_GE(s, 0);
    EXPECT_LE(s, 10);
  }
  c.clips_per_video = 3;
  EXPECT_EQ(ClipStarts(17, c, rng).value(), (std::vector<int>{0, 5, 10}));
  c.clips_per_video = 1;
  c.sampling = ClipSampling::kCenter;
  EXPECT_EQ(ClipStarts(3, c, rng).value(), std::vector<int>{0});  // shorter than a clip
  c.frames = 0;
  EXPECT_STATUS(ClipStarts(17, c, rng), StatusCode::kInvalidArgument);
}

TEST(MakeClipTest, EvalAtNativeSizeIsTheFramesInChannelFirstLayout) {
  FrameStack s = Ramp(6, 8, 8);
  ClipOptions c;
  c.frames = 3;
  c.stride = 2;
  TransformOptions t;
  t.train = false;
  t.size = 8;
  t.normalize = false;
  Rng rng(1);
  std::vector<float> f;
  std::vector<uint8_t> u;
  ASSERT_OK(MakeClip(s, 1, c, t, Flips{}, rng, &f, &u));
  ASSERT_EQ(u.size(), 3u * 3 * 8 * 8);
  auto at = [&](int ch, int frame, int y, int x) { return u[((ch * 3 + frame) * 8 + y) * 8 + x]; };
  EXPECT_EQ(at(0, 0, 2, 5), 5);  // R = x
  EXPECT_EQ(at(1, 2, 6, 1), 6);  // G = y
  EXPECT_EQ(at(2, 0, 0, 0), 1);  // B = source frame: start 1
  EXPECT_EQ(at(2, 2, 0, 0), 5);  // start + 2 * stride
  EXPECT_TRUE(f.empty());

  // Played backwards: the same frames, last first; and mirrored: x runs right to left.
  u.clear();
  ASSERT_OK(MakeClip(s, 1, c, t, Flips{/*mirror=*/true, /*reverse=*/true}, rng, &f, &u));
  EXPECT_EQ(at(2, 0, 0, 0), 5);
  EXPECT_EQ(at(2, 1, 0, 0), 3);
  EXPECT_EQ(at(2, 2, 0, 0), 1);
  EXPECT_EQ(at(0, 0, 2, 5), 2);  // R = 7 - x
  EXPECT_EQ(at(1, 2, 6, 1), 6);  // G = y, untouched
}

TEST(DrawFlipsTest, OnlyWhatIsOnAndOnlyInTraining) {
  TransformOptions t;
  t.flip = false;
  t.reverse = true;
  int mirrored = 0, reversed = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    Rng rng(seed);
    Flips flips = DrawFlips(t, rng);
    mirrored += flips.mirror;
    reversed += flips.reverse;
  }
  EXPECT_EQ(mirrored, 0);
  EXPECT_GT(reversed, 16);  // about half of 64
  EXPECT_LT(reversed, 48);
  t.flip = true;
  t.train = false;
  Rng rng(3);
  Flips eval = DrawFlips(t, rng);
  EXPECT_FALSE(eval.mirror || eval.reverse);
}

TEST(MakeClipTest, FlipMirrorsAndNormalisationUsesMeanAndStd) {
  FrameStack s = Ramp(1, 4, 4);
  ClipOptions c;
  c.frames = 1;
  TransformOptions t;
  t.size = 4;
  t.min_scale = t.max_scale = 1.0;
  t.min_ratio = t.max_ratio = 1.0;  // the whole frame
  t.normalize = false;
  std::vector<float> f;
  std::vector<uint8_t> u;
  bool saw_flip = false, saw_plain = false;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Rng rng(seed);
    u.clear();  // MakeClip appends
    ASSERT_OK(MakeClip(s, 0, c, t, DrawFlips(t, rng), rng, &f, &u));
    if (u[0] == 3) saw_flip = true;  // R at x = 0 is the last column
    if (u[0] == 0) saw_plain = true;
  }
  EXPECT_TRUE(saw_flip && saw_plain);

  t.train = false;
  t.normalize = true;
  t.mean = {0.5f, 0.5f, 0.5f};
  t.std = {0.25f, 0.25f, 0.25f};
  Rng rng(0);
  u.clear();
  ASSERT_OK(MakeClip(s, 0, c, t, Flips{}, rng, &f, &u));
  EXPECT_NEAR(f[1], (1 / 255.f - 0.5f) / 0.25f, 1e-6);  // R at x = 1
  EXPECT_TRUE(u.empty());
}

TEST(MakeClipTest, RandomResizedCropStaysInsideAndIsRepeatable) {
  FrameStack s = Ramp(2, 40, 60);
  ClipOptions c;
  c.frames = 2;
  TransformOptions t;
  t.size = 16;
  t.normalize = false;
  std::vector<float> f;
  std::vector<uint8_t> a, b;
  Rng r1(9), r2(9);
  ASSERT_OK(MakeClip(s, 0, c, t, Flips{}, r1, &f, &a));
  ASSERT_OK(MakeClip(s, 0, c, t, Flips{}, r2, &f, &b));
  EXPECT_EQ(a, b);
  for (size_t i = 0; i < 16 * 16; ++i) EXPECT_LE(a[i], 59);  // R = x stays inside the frame
  FrameStack bad = s;
  bad.pixels.pop_back();
  EXPECT_STATUS(MakeClip(bad, 0, c, t, Flips{}, r1, &f, &a), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::loader
