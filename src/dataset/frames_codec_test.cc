#include "dataset/frames_codec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using storage::testing::RandomBytes;

std::vector<media::Frame> Gradient(int t, int w, int h, media::PixelFormat format) {
  std::vector<media::Frame> frames;
  for (int i = 0; i < t; ++i) {
    media::Frame f = media::Frame::Make(w, h, format);
    for (size_t b = 0; b < f.data.size(); ++b) f.data[b] = static_cast<uint8_t>(b * 7 + i * 31);
    frames.push_back(std::move(f));
  }
  return frames;
}

TEST(FramesCodecTest, RawRoundTripAndHeaderLayout) {
  FramesHeader header{4, 6, 5, 2, FramesPixelFormat::kRaw};
  std::string pixels = RandomBytes(4 * 6 * 5 * 2, 1);
  auto payload = EncodeFrames(header, pixels);
  ASSERT_OK(payload);
  // The documented layout: magic, version, header size, T, H, W, C (little-endian), format.
  ASSERT_GE(payload->size(), kFramesHeaderBytes);
  EXPECT_EQ(payload->substr(0, 4), "RLFZ");
  const unsigned char expected[] = {1, 0, 32, 0, 4, 0, 0, 0, 6, 0, 0, 0, 5, 0,
                                    0, 0, 2,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::memcmp(payload->data() + 4, expected, sizeof(expected)), 0);
  // A zstd frame follows (magic 0xFD2FB528, little-endian).
  EXPECT_EQ(payload->substr(32, 4), std::string("\x28\xb5\x2f\xfd", 4));

  auto decoded = DecodeFrames(*payload);
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->header.frames, 4u);
  EXPECT_EQ(decoded->header.height, 6u);
  EXPECT_EQ(decoded->header.width, 5u);
  EXPECT_EQ(decoded->header.channels, 2u);
  EXPECT_EQ(decoded->header.format, FramesPixelFormat::kRaw);
  EXPECT_TRUE(decoded->pixels == pixels);
  auto only_header = ReadFramesHeader(*payload);
  ASSERT_OK(only_header);
  EXPECT_EQ(only_header->pixel_bytes(), pixels.size());
}

TEST(FramesCodecTest, MediaFramesRoundTrip) {
  for (media::PixelFormat format : {media::PixelFormat::kRgb24, media::PixelFormat::kGray8}) {
    std::vector<media::Frame> frames = Gradient(8, 33, 17, format);
    auto payload = EncodeFrames(frames);
    ASSERT_OK(payload);
    auto decoded = DecodeFramesToFrames(*payload);
    ASSERT_OK(decoded);
    ASSERT_EQ(decoded->size(), frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ((*decoded)[i].width, 33);
      EXPECT_EQ((*decoded)[i].height, 17);
      EXPECT_EQ((*decoded)[i].format, format);
      EXPECT_EQ((*decoded)[i].data, frames[i].data);
    }
    auto header = ReadFramesHeader(*payload);
    ASSERT_OK(header);
    EXPECT_EQ(header->channels, format == media::PixelFormat::kRgb24 ? 3u : 1u);
  }
}

TEST(FramesCodecTest, CompressionLevelIsApplied) {
  // Compressible but not trivial content: higher levels give smaller (or equal) output.
  std::vector<media::Frame> frames = Gradient(16, 64, 64, media::PixelFormat::kRgb24);
  FramesCodecOptions fast, strong;
  fast.level = 1;
  strong.level = 19;
  auto a = EncodeFrames(frames, fast), b = EncodeFrames(frames, strong);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LE(b->size(), a->size());
  EXPECT_LT(a->size(), 16u * 64 * 64 * 3 / 4);
  auto da = DecodeFramesToFrames(*a), db = DecodeFramesToFrames(*b);
  ASSERT_TRUE(da.ok() && db.ok());
  EXPECT_EQ((*da)[15].data, (*db)[15].data);
}

TEST(FramesCodecTest, EncodeRefusesInconsistentInput) {
  EXPECT_STATUS(EncodeFrames(FramesHeader{1, 2, 2, 3, FramesPixelFormat::kRgb24}, "short"),
                StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeFrames(FramesHeader{0, 2, 2, 3, FramesPixelFormat::kRaw}, ""),
                StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeFrames(FramesHeader{1, 1, 1, 2, FramesPixelFormat::kRgb24}, "ab"),
                StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeFrames(std::vector<media::Frame>{}), StatusCode::kInvalidArgument);
  std::vector<media::Frame> mixed = Gradient(2, 4, 4, media::PixelFormat::kRgb24);
  mixed[1] = media::Frame::Make(5, 4);
  EXPECT_STATUS(EncodeFrames(mixed), StatusCode::kInvalidArgument);
  std::vector<media::Frame> yuv = {media::Frame::Make(4, 4, media::PixelFormat::kYuv420p)};
  EXPECT_STATUS(EncodeFrames(yuv), StatusCode::kInvalidArgument);
  std::vector<media::Frame> short_data = Gradient(1, 4, 4, media::PixelFormat::kRgb24);
  short_data[0].data.pop_back();
  EXPECT_STATUS(EncodeFrames(short_data), StatusCode::kInvalidArgument);
}

TEST(FramesCodecTest, TruncatedOrCorruptPayloadIsDataLoss) {
  FramesHeader header{3, 8, 8, 3, FramesPixelFormat::kRgb24};
  auto payload = EncodeFrames(header, RandomBytes(3 * 8 * 8 * 3, 2));
  ASSERT_OK(payload);
  // Every truncation, inside the header or inside the zstd frame.
  for (size_t cut = 0; cut < payload->size(); ++cut) {
    auto decoded = DecodeFrames(payload->substr(0, cut));
    ASSERT_FALSE(decoded.ok()) << "cut at " << cut;
    EXPECT_STATUS(decoded, StatusCode::kDataLoss) << decoded.status().ToString();
  }
  // Trailing bytes.
  EXPECT_STATUS(DecodeFrames(*payload + "x"), StatusCode::kDataLoss);
  // Bad magic.
  std::string bad = *payload;
  bad[0] = 'X';
  EXPECT_STATUS(DecodeFrames(bad), StatusCode::kDataLoss);
  // Header dimensions that disagree with the zstd content size.
  bad = *payload;
  bad[8] = 4;  // T = 4
  auto mismatch = DecodeFrames(bad);
  EXPECT_STATUS(mismatch, StatusCode::kDataLoss);
  EXPECT_NE(mismatch.status().message().find("4x8x8x3"), std::string::npos)
      << mismatch.status().message();
  // Format contradicting C.
  bad = *payload;
  bad[24] = 2;  // GRAY8 with C == 3
  EXPECT_STATUS(DecodeFrames(bad), StatusCode::kDataLoss);
  bad[24] = 9;
  EXPECT_STATUS(DecodeFrames(bad), StatusCode::kDataLoss);
  // A flipped byte inside the compressed data: zstd's checksum or structure catches it.
  for (size_t pos = kFramesHeaderBytes + 4; pos < payload->size(); pos += 5) {
    bad = *payload;
    bad[pos] ^= 0x5a;
    auto flipped = DecodeFrames(bad);
    if (flipped.ok()) {
      ADD_FAILURE() << "flip at " << pos << " went unnoticed";
    } else {
      EXPECT_STATUS(flipped, StatusCode::kDataLoss) << flipped.status().ToString();
    }
  }
}

TEST(FramesCodecTest, VersionsAndLimits) {
  auto payload =
      EncodeFrames(FramesHeader{2, 4, 4, 1, FramesPixelFormat::kGray8}, std::string(32, '\x10'));
  ASSERT_OK(payload);
  std::string newer = *payload;
  newer[4] = 2;
  EXPECT_STATUS(DecodeFrames(newer), StatusCode::kFailedPrecondition);
  FramesDecodeOptions tight;
  tight.max_pixel_bytes = 31;
  EXPECT_STATUS(DecodeFrames(*payload, tight), StatusCode::kResourceExhausted);
  // A header claiming an absurd size is refused before any allocation.
  std::string huge = *payload;
  std::memset(huge.data() + 8, 0xff, 16);  // T = H = W = C = 2^32 - 1
  huge[24] = 0;
  EXPECT_STATUS(DecodeFrames(huge), StatusCode::kDataLoss);  // overflows
  std::string big = *payload;
  std::memset(big.data() + 12, 0, 8);
  big[13] = 0x40;  // H = 16384
  big[17] = 0x40;  // W = 16384, 2 * 16384 * 16384 * 1 = 512 MiB
  tight.max_pixel_bytes = 1 << 20;
  EXPECT_STATUS(DecodeFrames(big, tight), StatusCode::kResourceExhausted);
  // Raw payloads have no media::Frame format.
  auto raw = EncodeFrames(FramesHeader{1, 1, 1, 4, FramesPixelFormat::kRaw}, "abcd");
  ASSERT_OK(raw);
  EXPECT_STATUS(DecodeFramesToFrames(*raw), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::dataset
