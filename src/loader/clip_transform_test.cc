#include "loader/clip_transform.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

// The transform as it was written first, one value at a time with no precomputed offsets: the
// oracle the vector kernel must match bit for bit.
std::vector<float> OracleClip(const FrameStack& s, int start, const ClipOptions& clip, int n,
                              double bx, double by, double bw, double bh, bool mirror,
                              bool normalize, const TransformOptions& t) {
  std::vector<float> out(3 * static_cast<size_t>(clip.frames) * n * n);
  auto axis = [&](double origin, double extent, int limit, int o, bool flip, int* i0, int* i1) {
    int oo = flip ? n - 1 - o : o;
    double src = std::clamp(origin + (oo + 0.5) * extent / n - 0.5, 0.0, limit - 1.0);
    *i0 = static_cast<int>(std::floor(src));
    *i1 = std::min(*i0 + 1, limit - 1);
    return static_cast<float>(src - *i0);
  };
  for (int f = 0; f < clip.frames; ++f) {
    const int frame = std::min(start + f * clip.stride, s.t - 1);
    const auto* src = reinterpret_cast<const uint8_t*>(s.pixels.data()) +
                      static_cast<size_t>(frame) * s.h * s.w * 3;
    for (int y = 0; y < n; ++y) {
      int y0, y1;
      const float wy = axis(by, bh, s.h, y, false, &y0, &y1);
      for (int ch = 0; ch < 3; ++ch) {
        for (int x = 0; x < n; ++x) {
          int x0, x1;
          const float wx = axis(bx, bw, s.w, x, mirror, &x0, &x1);
          const uint8_t* r0 = src + static_cast<size_t>(y0) * s.w * 3;
          const uint8_t* r1 = src + static_cast<size_t>(y1) * s.w * 3;
          const int a = x0 * 3 + ch, b = x1 * 3 + ch;
          float top = r0[a] + (r0[b] - r0[a]) * wx;
          float bottom = r1[a] + (r1[b] - r1[a]) * wx;
          float v = top + (bottom - top) * wy;
          const float scale = 1.f / (255.f * t.std[static_cast<size_t>(ch)]);
          const float bias = -t.mean[static_cast<size_t>(ch)] / t.std[static_cast<size_t>(ch)];
          // NOLINTNEXTLINE(bugprone-incorrect-roundings)
          float u8 = static_cast<uint8_t>(std::min(255.f, std::max(0.f, v)) + 0.5f);
          out[((static_cast<size_t>(ch) * clip.frames + f) * n + y) * n + x] =
              normalize ? v * scale + bias : u8;
        }
      }
    }
  }
  return out;
}

// Noise frames, so that every tap's weight shows in the result.
FrameStack Noise(int t, int h, int w, uint64_t seed) {
  FrameStack s;
  s.t = t;
  s.h = h;
  s.w = w;
  Rng rng(seed);
  s.pixels.resize(static_cast<size_t>(t) * h * w * 3);
  for (char& c : s.pixels) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST(MakeClipTest, EveryPathGivesTheOraclesBits) {
  // Evaluation's centre crop is the box the oracle is given; sizes off the kernel's 8-pixel step,
  // frames 1 and 2 pixels wide (the scalar path), upscaling and downscaling.
  struct Case {
    int h, w, n;
  };
  int checked = 0;
  for (const Case& c : {Case{40, 60, 16}, Case{31, 47, 13}, Case{128, 171, 112}, Case{9, 2, 24},
                        Case{5, 1, 8}, Case{112, 149, 112}, Case{200, 300, 57}}) {
    FrameStack s = Noise(3, c.h, c.w, static_cast<uint64_t>(c.h * 1000 + c.w));
    ClipOptions clip;
    clip.frames = 2;
    clip.stride = 1;
    for (bool normalize : {true, false}) {
      for (bool mirror : {false, true}) {
        TransformOptions t;
        t.train = false;
        t.size = c.n;
        t.normalize = normalize;
        Rng rng(1);
        std::vector<float> f;
        std::vector<uint8_t> u;
        ASSERT_OK(MakeClip(s, 1, clip, t, Flips{mirror, false}, rng, &f, &u));
        const double scale = static_cast<double>(c.n) / std::min(c.w, c.h);
        const double bw = c.n / scale;
        std::vector<float> want = OracleClip(s, 1, clip, c.n, (c.w - bw) / 2, (c.h - bw) / 2, bw,
                                             bw, mirror, normalize, t);
        std::vector<float> got = normalize ? f : std::vector<float>(u.begin(), u.end());
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << c.w << "x" << c.h << " -> " << c.n << " value " << i
                                     << (normalize ? " f32" : " u8") << (mirror ? " mirror" : "");
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 28);
}

}  // namespace
}  // namespace reel::loader
