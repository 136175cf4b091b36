// Tests of clip sampling and rendering: motion names, options, seeds, the sampled specs'
// invariants, determinism, and masks and frames that match the geometry.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "datagen/clip_test_util.h"
#include "datagen/datagen.h"
#include "media/frame.h"
#include "testing/status_matchers.h"

namespace reel::datagen {
namespace {

using testing::MaskMoments;
using testing::Moments;

DatagenOptions SmallOptions() {
  DatagenOptions o;
  o.width = 96;
  o.height = 80;
  o.min_frames = 6;
  o.max_frames = 10;
  return o;
}

TEST(MotionTest, NamesRoundTrip) {
  ASSERT_EQ(AllMotions().size(), static_cast<size_t>(kNumMotions));
  std::set<std::string_view> names;
  for (Motion m : AllMotions()) {
    names.insert(MotionName(m));
    EXPECT_EQ(MotionFromName(MotionName(m)), m);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumMotions));
  EXPECT_EQ(MotionName(Motion::kRotateCounterClockwise), "RotateCounterClockwise");
  EXPECT_FALSE(MotionFromName("moveleft").has_value());
  EXPECT_FALSE(MotionFromName("").has_value());
}

TEST(OptionsTest, ValidationAndClasses) {
  DatagenOptions o;
  EXPECT_OK(ValidateOptions(o));
  auto classes = ResolveClasses(o);
  ASSERT_OK(classes);
  EXPECT_EQ(*classes, AllMotions());

  o.num_classes = 3;
  EXPECT_EQ(ResolveClasses(o)->size(), 3u);
  o.class_names = {"Shrink", "MoveUp"};
  ASSERT_OK(ResolveClasses(o));
  EXPECT_EQ(*ResolveClasses(o), (std::vector<Motion>{Motion::kShrink, Motion::kMoveUp}));

  auto expect_bad = [](DatagenOptions bad, const std::string& needle) {
    Status s = ValidateOptions(bad);
    EXPECT_STATUS(s, StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  DatagenOptions base;
  {
    auto b = base;
    b.num_classes = 9;
    expect_bad(b, "num_classes");
  }
  {
    auto b = base;
    b.num_classes = 0;
    expect_bad(b, "num_classes");
  }
  {
    auto b = base;
    b.class_names = {"Jump"};
    expect_bad(b, "unknown class 'Jump'");
  }
  {
    auto b = base;
    b.class_names = {"Grow", "Grow"};
    expect_bad(b, "twice");
  }
  {
    auto b = base;
    b.videos_per_class = 0;
    expect_bad(b, "videos_per_class");
  }
  {
    auto b = base;
    b.train_fraction = 1.5;
    expect_bad(b, "train_fraction");
  }
  {
    auto b = base;
    b.width = 8;
    expect_bad(b, "size");
  }
  {
    auto b = base;
    b.fps = 0;
    expect_bad(b, "fps");
  }
  {
    auto b = base;
    b.min_frames = 1;
    expect_bad(b, "frames");
  }
  {
    auto b = base;
    b.max_frames = 10;
    expect_bad(b, "frames");
  }
  {
    auto b = base;
    b.noise = 100;
    expect_bad(b, "noise");
  }
  {
    auto b = base;
    b.crf = 52;
    expect_bad(b, "crf");
  }
}

TEST(ClipTest, SeedsAreDistinct) {
  std::set<uint64_t> seeds;
  for (uint64_t seed : {0ull, 1ull, 2ull}) {
    for (Motion m : AllMotions()) {
      for (int k = 0; k < 50; ++k) seeds.insert(ClipSeed(seed, m, k));
    }
  }
  EXPECT_EQ(seeds.size(), 3u * kNumMotions * 50);
}

TEST(ClipTest, SameSeedSameFramesDifferentSeedDifferentFrames) {
  const auto o = SmallOptions();
  const ClipSpec a = SampleClip(7, Motion::kRotateClockwise, 3, o);
  const auto frames_a = RenderClip(a);
  const auto frames_b = RenderClip(SampleClip(7, Motion::kRotateClockwise, 3, o));
  ASSERT_EQ(frames_a.size(), static_cast<size_t>(a.num_frames));
  ASSERT_EQ(frames_a.size(), frames_b.size());
  for (size_t t = 0; t < frames_a.size(); ++t) {
    EXPECT_EQ(frames_a[t].data, frames_b[t].data) << "frame " << t;
    EXPECT_EQ(frames_a[t].index, static_cast<int64_t>(t));
    EXPECT_DOUBLE_EQ(frames_a[t].timestamp_s, t / 25.0);
    EXPECT_EQ(frames_a[t].width, 96);
    EXPECT_EQ(frames_a[t].height, 80);
    EXPECT_EQ(frames_a[t].format, media::PixelFormat::kRgb24);
    EXPECT_EQ(frames_a[t].data.size(), 96u * 80 * 3);
  }
  // Another seed, another index, another class: other pixels.
  for (const ClipSpec& other :
       {SampleClip(8, Motion::kRotateClockwise, 3, o),
        SampleClip(7, Motion::kRotateClockwise, 4, o), SampleClip(7, Motion::kGrow, 3, o)}) {
    EXPECT_NE(RenderClip(other)[0].data, frames_a[0].data);
  }
  // Rendering frame t alone gives the same pixels as rendering the whole clip.
  ClipRenderer renderer(a);
  EXPECT_EQ(renderer.Render(a.num_frames - 1).data, frames_a.back().data);
  // Per-frame noise: consecutive frames differ even where nothing moves.
  EXPECT_NE(frames_a[0].data, frames_a[1].data);
}

TEST(ClipTest, SpecInvariants) {
  DatagenOptions o;  // 128x128, 24..48 frames
  o.width = 160;
  o.height = 112;
  std::map<ShapeKind, int> shapes;
  std::set<int> lengths;
  double min_contrast = 1e9;
  for (Motion m : AllMotions()) {
    for (int k = 0; k < 60; ++k) {
      const ClipSpec s = SampleClip(11, m, k, o);
      ASSERT_GE(s.num_frames, o.min_frames);
      ASSERT_LE(s.num_frames, o.max_frames);
      lengths.insert(s.num_frames);
      shapes[s.shape]++;
      // Exactly the class's variable moves, in the class's direction.
      const std::array<double, 4> v = {s.vx, s.vy, s.omega, s.growth};
      int moving = 0;
      for (double x : v) moving += x != 0;
      ASSERT_EQ(moving, 1);
      switch (m) {
        case Motion::kMoveLeft:
          EXPECT_LT(s.vx, -0.5);
          break;
        case Motion::kMoveRight:
          EXPECT_GT(s.vx, 0.5);
          break;
        case Motion::kMoveUp:
          EXPECT_LT(s.vy, -0.5);
          break;
        case Motion::kMoveDown:
          EXPECT_GT(s.vy, 0.5);
          break;
        case Motion::kRotateClockwise:
          EXPECT_GE(s.omega, 2 * M_PI / 180 - 1e-12);
          break;
        case Motion::kRotateCounterClockwise:
          EXPECT_LE(s.omega, -2 * M_PI / 180 + 1e-12);
          break;
        case Motion::kGrow:
          EXPECT_GT(s.growth, 0.01);
          break;
        case Motion::kShrink:
          EXPECT_LT(s.growth, -0.01);
          break;
      }
      // The shape stays inside the frame in every frame.
      for (int t = 0; t < s.num_frames; ++t) {
        const ShapeState st = s.StateAt(t);
        ASSERT_GE(st.x - st.radius, 0.0) << MotionName(m) << " " << k << " t=" << t;
        ASSERT_LE(st.x + st.radius, o.width);
        ASSERT_GE(st.y - st.radius, 0.0);
        ASSERT_LE(st.y + st.radius, o.height);
        ASSERT_GE(st.radius, 0.07 * 112 - 1e-9);
        ASSERT_LE(st.radius, 0.22 * 112 + 1e-9);
      }
      // Enough contrast between the shape and every colour of its background.
      for (double blend = 0; blend <= 1.0; blend += 0.125) {
        double d = 0;
        for (int c = 0; c < 3; ++c) {
          const double bg =
              s.background[0][c] + blend * (double(s.background[1][c]) - s.background[0][c]);
          d += std::pow(s.color[c] - bg, 2);
        }
        min_contrast = std::min(min_contrast, std::sqrt(d));
      }
    }
  }
  EXPECT_EQ(shapes.size(), static_cast<size_t>(kNumShapeKinds));
  EXPECT_GT(lengths.size(), 15u);
  EXPECT_GE(min_contrast, 100.0);
}

TEST(ClipTest, PolarityBrightOnDarkByDefaultAnyOnRequest) {
  DatagenOptions o;
  EXPECT_EQ(o.polarity, Polarity::kBrightOnDark);
  int dark_shapes_with_any = 0, bright_backgrounds_with_any = 0;
  for (Motion m : AllMotions()) {
    for (int k = 0; k < 40; ++k) {
      o.polarity = Polarity::kBrightOnDark;
      const ClipSpec s = SampleClip(5, m, k, o);
      for (int c = 0; c < 3; ++c) {
        ASSERT_GE(s.color[c], 150) << MotionName(m) << " " << k;
        ASSERT_LE(s.background[0][c], 120);
        ASSERT_LE(s.background[1][c], 120);
      }
      o.polarity = Polarity::kAny;
      const ClipSpec a = SampleClip(5, m, k, o);
      dark_shapes_with_any += *std::min_element(a.color, a.color + 3) < 150;
      bright_backgrounds_with_any += *std::max_element(a.background[0], a.background[0] + 3) > 120;
    }
  }
  EXPECT_GT(dark_shapes_with_any, 100);
  EXPECT_GT(bright_backgrounds_with_any, 100);
  EXPECT_EQ(PolarityFromName("any"), Polarity::kAny);
  EXPECT_EQ(PolarityFromName(PolarityName(Polarity::kBrightOnDark)), Polarity::kBrightOnDark);
  EXPECT_FALSE(PolarityFromName("dark").has_value());
}

TEST(ClipTest, MaskMatchesGeometryAndFramesShowTheShape) {
  DatagenOptions o = SmallOptions();
  o.noise = 0;
  for (Motion m : AllMotions()) {
    for (int k = 0; k < 10; ++k) {
      const ClipSpec s = SampleClip(5, m, k, o);
      ClipRenderer r(s);
      for (int t : {0, s.num_frames - 1}) {
        const ShapeState st = s.StateAt(t);
        const Moments mo = MaskMoments(r.Mask(t));
        // Every shape is point-symmetric or regular: its centroid is its centre.
        EXPECT_NEAR(mo.cx, st.x, 0.15) << ShapeKindName(s.shape);
        EXPECT_NEAR(mo.cy, st.y, 0.15) << ShapeKindName(s.shape);
        EXPECT_GT(mo.area, 0.2 * M_PI * st.radius * st.radius);
        EXPECT_LT(mo.area, M_PI * st.radius * st.radius);
        // Without noise, the centre pixel has the shape's colour and a corner the texture's.
        const media::Frame f = r.Render(t);
        const uint8_t* centre = f.Pixel(static_cast<int>(st.x), static_cast<int>(st.y));
        const double inner = s.shape == ShapeKind::kStar ? s.shape_param * 0.8 : 0.3;
        if (st.radius * inner > 1.5) {
          for (int c = 0; c < 3; ++c) EXPECT_EQ(centre[c], s.color[c]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace reel::datagen
