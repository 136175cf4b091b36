// Scaler, crops and orientations on synthetic frames.
#include "media/scaler.h"

#include <gtest/gtest.h>

#include "media/testing/media_testing.h"
#include "testing/status_matchers.h"

namespace reel::media {
namespace {

using testing::Compare;
using testing::GradientFrame;

// A frame whose every pixel encodes its own position: R = x, G = y, B = 7.
Frame CoordinateFrame(int width, int height) {
  Frame f = Frame::Make(width, height, PixelFormat::kRgb24);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      f.Pixel(x, y)[0] = static_cast<uint8_t>(x);
      f.Pixel(x, y)[1] = static_cast<uint8_t>(y);
      f.Pixel(x, y)[2] = 7;
    }
  }
  return f;
}

TEST(OrientTest, RotatesClockwiseByNinety) {
  Frame in = CoordinateFrame(3, 2);  // 3 wide, 2 high
  Frame out = Orient(in, Orientation::Rotation(90));
  ASSERT_EQ(out.width, 2);
  ASSERT_EQ(out.height, 3);
  // Turned clockwise: the old bottom-left corner (0, 1) is the new top-left.
  EXPECT_EQ(out.Pixel(0, 0)[0], 0);
  EXPECT_EQ(out.Pixel(0, 0)[1], 1);
  // The old top-left (0, 0) is the new top-right.
  EXPECT_EQ(out.Pixel(1, 0)[0], 0);
  EXPECT_EQ(out.Pixel(1, 0)[1], 0);
  // The old top-right (2, 0) is the new bottom-right.
  EXPECT_EQ(out.Pixel(1, 2)[0], 2);
  EXPECT_EQ(out.Pixel(1, 2)[1], 0);
}

TEST(OrientTest, RotationsCompose) {
  Frame in = GradientFrame(7, 5, 3);
  Frame r90 = Orient(in, Orientation::Rotation(90));
  Frame r180 = Orient(r90, Orientation::Rotation(90));
  EXPECT_EQ(r180.data, Orient(in, Orientation::Rotation(180)).data);
  Frame r270 = Orient(r180, Orientation::Rotation(90));
  EXPECT_EQ(r270.data, Orient(in, Orientation::Rotation(270)).data);
  EXPECT_EQ(r270.data, Orient(in, Orientation::Rotation(-90)).data);
  EXPECT_EQ(Orient(r270, Orientation::Rotation(90)).data, in.data);
  EXPECT_EQ(Orient(in, Orientation::Rotation(360)).data, in.data);
  EXPECT_TRUE(Orientation::Rotation(0).identity());
  EXPECT_EQ(Orientation::Rotation(88), Orientation::Rotation(90));
}

TEST(OrientTest, MirrorsAndKeepsIndexAndTime) {
  Frame in = CoordinateFrame(4, 3);
  in.index = 9;
  in.timestamp_s = 1.5;
  Frame h = Orient(in, Orientation{false, true, false});
  EXPECT_EQ(h.Pixel(0, 0)[0], 3);
  EXPECT_EQ(h.Pixel(0, 0)[1], 0);
  Frame v = Orient(in, Orientation{false, false, true});
  EXPECT_EQ(v.Pixel(0, 0)[0], 0);
  EXPECT_EQ(v.Pixel(0, 0)[1], 2);
  EXPECT_EQ(v.index, 9);
  EXPECT_EQ(v.timestamp_s, 1.5);
}

TEST(OrientTest, TurnsEachYuvPlaneOnItsOwn) {
  // 5x3 YUV420P: luma 5x3, chroma 3x2 each. Transposed: luma 3x5, chroma 2x3.
  Frame in = Frame::Make(5, 3, PixelFormat::kYuv420p);
  for (size_t i = 0; i < in.data.size(); ++i) in.data[i] = static_cast<uint8_t>(i);
  Frame out = Orient(in, Orientation{true, false, false});
  ASSERT_EQ(out.width, 3);
  ASSERT_EQ(out.height, 5);
  ASSERT_EQ(out.data.size(), Frame::ByteSize(3, 5, PixelFormat::kYuv420p));
  // Luma (x, y) -> (y, x).
  EXPECT_EQ(out.data[1 * 3 + 2], in.data[2 * 5 + 1]);
  // U plane starts after 15 luma bytes in both; U(x=2, y=1) of the input is at 15 + 1*3 + 2.
  EXPECT_EQ(out.data[15 + 2 * 2 + 1], in.data[15 + 1 * 3 + 2]);
  // V plane: after 15 + 6.
  EXPECT_EQ(out.data[21 + 2 * 2 + 1], in.data[21 + 1 * 3 + 2]);
  EXPECT_EQ(Orient(out, Orientation{true, false, false}).data, in.data);
}

TEST(ScalerTest, ResizeKeepsFlatColoursFlat) {
  Frame in = Frame::Make(64, 48);
  for (size_t i = 0; i < in.data.size(); i += 3) {
    in.data[i] = 200;
    in.data[i + 1] = 100;
    in.data[i + 2] = 50;
  }
  for (Interpolation interpolation : {Interpolation::kNearest, Interpolation::kBilinear,
                                      Interpolation::kBicubic, Interpolation::kArea}) {
    auto out = Resize(in, 21, 17, interpolation);
    ASSERT_OK(out);
    EXPECT_EQ(out->width, 21);
    EXPECT_EQ(out->height, 17);
    for (size_t i = 0; i < out->data.size(); i += 3) {
      ASSERT_NEAR(out->data[i], 200, 1);
      ASSERT_NEAR(out->data[i + 1], 100, 1);
      ASSERT_NEAR(out->data[i + 2], 50, 1);
    }
  }
}

TEST(ScalerTest, YuvRoundTripIsClose) {
  Frame in = GradientFrame(96, 72, 5);
  auto yuv = ConvertFormat(in, PixelFormat::kYuv420p);
  ASSERT_OK(yuv);
  EXPECT_EQ(yuv->data.size(), Frame::ByteSize(96, 72, PixelFormat::kYuv420p));
  auto back = ConvertFormat(*yuv, PixelFormat::kRgb24);
  ASSERT_OK(back);
  EXPECT_GT(Compare(in, *back).psnr, 28.0);
  auto gray = ConvertFormat(in, PixelFormat::kGray8);
  ASSERT_OK(gray);
  EXPECT_EQ(gray->data.size(), 96u * 72u);
}

TEST(ScalerTest, OddSizesWork) {
  Frame in = GradientFrame(33, 17, 1);
  auto yuv = ConvertFormat(in, PixelFormat::kYuv420p);
  ASSERT_OK(yuv);
  EXPECT_EQ(yuv->data.size(), Frame::ByteSize(33, 17, PixelFormat::kYuv420p));
  auto small = Resize(*yuv, 11, 7);
  ASSERT_OK(small);
  EXPECT_EQ(small->data.size(), Frame::ByteSize(11, 7, PixelFormat::kYuv420p));
}

TEST(ScalerTest, ReusesItsContextAndChecksInput) {
  auto scaler = Scaler::Create(32, 24, PixelFormat::kRgb24, 16, 12, PixelFormat::kGray8);
  ASSERT_OK(scaler);
  for (int t = 0; t < 3; ++t) {
    Frame in = GradientFrame(32, 24, t);
    in.index = t;
    auto out = scaler->Scale(in);
    ASSERT_OK(out);
    EXPECT_EQ(out->format, PixelFormat::kGray8);
    EXPECT_EQ(out->index, t);
  }
  EXPECT_STATUS(scaler->Scale(GradientFrame(31, 24, 0)), StatusCode::kInvalidArgument);
  Frame truncated = GradientFrame(32, 24, 0);
  truncated.data.resize(10);
  EXPECT_STATUS(scaler->Scale(truncated), StatusCode::kInvalidArgument);
  EXPECT_EQ(Scaler::Create(0, 24, PixelFormat::kRgb24, 16, 12, PixelFormat::kRgb24).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CropTest, CutsTheWindow) {
  Frame in = CoordinateFrame(10, 8);
  auto c = Crop(in, 3, 2, 4, 5);
  ASSERT_OK(c);
  EXPECT_EQ(c->width, 4);
  EXPECT_EQ(c->height, 5);
  EXPECT_EQ(c->Pixel(0, 0)[0], 3);
  EXPECT_EQ(c->Pixel(0, 0)[1], 2);
  EXPECT_EQ(c->Pixel(3, 4)[0], 6);
  EXPECT_EQ(c->Pixel(3, 4)[1], 6);
  auto centre = CenterCrop(in, 4, 4);
  ASSERT_OK(centre);
  EXPECT_EQ(centre->Pixel(0, 0)[0], 3);
  EXPECT_EQ(centre->Pixel(0, 0)[1], 2);
  EXPECT_STATUS(Crop(in, 8, 0, 4, 4), StatusCode::kInvalidArgument);
  EXPECT_STATUS(CenterCrop(in, 11, 4), StatusCode::kInvalidArgument);
  EXPECT_STATUS(Crop(in, 0, 0, 0, 4), StatusCode::kInvalidArgument);
}

TEST(CropTest, YuvOffsetsStayEven) {
  Frame in = Frame::Make(8, 8, PixelFormat::kYuv420p);
  for (size_t i = 0; i < in.data.size(); ++i) in.data[i] = static_cast<uint8_t>(i);
  auto c = Crop(in, 3, 3, 4, 4);  // starts at (2, 2)
  ASSERT_OK(c);
  EXPECT_EQ(c->data[0], in.data[2 * 8 + 2]);
  EXPECT_EQ(c->data[16], in.data[64 + 1 * 4 + 1]);  // U(1, 1)
}

TEST(ShortSideSizeTest, TruncatesTheLongSideLikeTorchvision) {
  EXPECT_EQ(ShortSideSize(340, 256, 32), std::make_pair(42, 32));
  EXPECT_EQ(ShortSideSize(256, 340, 32), std::make_pair(32, 42));
  EXPECT_EQ(ShortSideSize(1920, 1080, 128), std::make_pair(227, 128));
  EXPECT_EQ(ShortSideSize(100, 100, 10), std::make_pair(10, 10));
  EXPECT_EQ(ShortSideSize(1000, 1, 1), std::make_pair(1000, 1));
  EXPECT_EQ(ShortSideSize(640, 360, 0), std::make_pair(640, 360));
}

}  // namespace
}  // namespace reel::media
