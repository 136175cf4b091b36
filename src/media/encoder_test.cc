// VideoEncoder: libx264 into a complete MP4 in memory, checked by probing and decoding it back,
// and by the ffprobe command line.
#include "media/encoder.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <fstream>

#include "media/decoder.h"
#include "media/probe.h"
#include "media/scaler.h"
#include "media/testing/media_testing.h"
#include "testing/status_matchers.h"

namespace reel::media {
namespace {

using testing::Compare;
using testing::GradientFrame;

// Lossy H.264 at crf 23 on these synthetic frames: the worst frame measures about 33 dB.
constexpr double kMinPsnr = 30.0;

Result<std::string> Encode(const EncoderOptions& options, int frames) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<VideoEncoder> encoder, VideoEncoder::Create(options));
  for (int t = 0; t < frames; ++t) {
    REEL_RETURN_IF_ERROR(encoder->Add(GradientFrame(options.width, options.height, t)));
  }
  return encoder->Finish();
}

EncoderOptions Small() {
  EncoderOptions options;
  options.width = 96;
  options.height = 72;
  options.gop = 16;
  return options;
}

TEST(EncoderTest, Mp4WithKeyframesEveryGop) {
  auto bytes = Encode(Small(), 64);
  ASSERT_OK(bytes);
  ASSERT_GT(bytes->size(), 1000u);
  EXPECT_EQ(bytes->substr(4, 4), "ftyp");

  auto info = Probe(Input::Memory(*bytes, "synthetic.mp4"));
  ASSERT_OK(info);
  EXPECT_EQ(info->container, "mov,mp4,m4a,3gp,3g2,mj2");
  EXPECT_EQ(info->codec, "h264");
  EXPECT_EQ(info->pixel_format, "yuv420p");
  EXPECT_EQ(info->width, 96);
  EXPECT_EQ(info->height, 72);
  EXPECT_EQ(info->frame_count, 64);
  EXPECT_EQ(info->container_frame_count, 64);
  EXPECT_EQ(info->keyframes, (std::vector<int64_t>{0, 16, 32, 48}));
  EXPECT_NEAR(info->frame_rate.value(), 25.0, 1e-9);
  EXPECT_NEAR(info->duration_s, 64 / 25.0, 1e-9);
  EXPECT_DOUBLE_EQ(info->start_time_s, 0.0);
  EXPECT_FALSE(info->has_audio);
}

TEST(EncoderTest, DecodesBackCloseToTheInput) {
  auto bytes = Encode(Small(), 64);
  ASSERT_OK(bytes);
  auto decoder = VideoDecoder::Open(Input::Memory(*bytes, "synthetic.mp4"));
  ASSERT_OK(decoder);
  int64_t n = 0;
  double worst = INFINITY;
  Status s = (*decoder)->ForEachFrame([&](Frame&& f) {
    EXPECT_EQ(f.index, n);
    EXPECT_NEAR(f.timestamp_s, n / 25.0, 1e-9);
    worst = std::min(worst, Compare(f, GradientFrame(96, 72, static_cast<int>(n))).psnr);
    ++n;
    return Status::Ok();
  });
  ASSERT_OK(s);
  EXPECT_EQ(n, 64);
  EXPECT_GT(worst, kMinPsnr);
  RecordProperty("worst_psnr_x100", static_cast<int>(worst * 100));

  // Random access into the re-encoded file lands on the right frames.
  auto frames = (*decoder)->DecodeFrames({50, 17, 33});
  ASSERT_OK(frames);
  EXPECT_GT(Compare((*frames)[0], GradientFrame(96, 72, 50)).psnr, kMinPsnr);
  EXPECT_GT(Compare((*frames)[1], GradientFrame(96, 72, 17)).psnr, kMinPsnr);
  EXPECT_GT(Compare((*frames)[2], GradientFrame(96, 72, 33)).psnr, kMinPsnr);
}

// YUV420P frames go to x264 as they are: decoded back as YUV420P, each is close to its own
// input (not to a neighbour: the pictures move), at odd sizes too.
TEST(EncoderTest, YuvFramesAreEncodedAsTheyAre) {
  for (const auto& size : {std::pair{96, 72}, std::pair{75, 45}}) {
    const int width = size.first, height = size.second;
    SCOPED_TRACE(std::to_string(width) + "x" + std::to_string(height));
    EncoderOptions options = Small();
    options.width = width;
    options.height = height;
    options.input = PixelFormat::kYuv420p;
    std::vector<Frame> input;
    auto encoder = VideoEncoder::Create(options);
    ASSERT_OK(encoder);
    for (int t = 0; t < 24; ++t) {
      auto yuv = ConvertFormat(GradientFrame(width, height, 4 * t), PixelFormat::kYuv420p);
      ASSERT_OK(yuv);
      EXPECT_EQ(yuv->color_matrix, 6);  // swscale's RGB -> YUV: BT.601
      yuv->color_matrix = options.color_matrix;
      ASSERT_OK((*encoder)->Add(*yuv));
      input.push_back(std::move(*yuv));
    }
    auto bytes = (*encoder)->Finish();
    ASSERT_OK(bytes);
    DecodeOptions yuv_out;
    yuv_out.format = PixelFormat::kYuv420p;
    auto decoder = VideoDecoder::Open(Input::Memory(*bytes, "yuv.mp4"), yuv_out);
    ASSERT_OK(decoder);
    size_t n = 0;
    ASSERT_OK((*decoder)->ForEachFrame([&](Frame&& f) {
      auto cropped = Crop(f, 0, 0, width, height);
      EXPECT_OK(cropped);
      if (!cropped.ok() || n >= input.size()) return Status::Ok();
      const double own = Compare(*cropped, input[n]).psnr;
      EXPECT_GT(own, kMinPsnr) << "frame " << n;
      if (n > 0) {
        EXPECT_GT(own, Compare(*cropped, input[n - 1]).psnr + 3) << "frame " << n;
      }
      ++n;
      return Status::Ok();
    }));
    EXPECT_EQ(n, input.size());
  }
}

TEST(EncoderTest, AnimatedPngIsLosslessAtAnyFrameSize) {
  EncoderOptions options;
  options.width = 33;  // odd sizes need no padding in RGB
  options.height = 21;
  options.codec = "apng";
  options.container = "apng";
  options.fps_num = 8;
  auto bytes = Encode(options, 5);
  ASSERT_OK(bytes);
  EXPECT_EQ(bytes->substr(1, 3), "PNG");
  auto decoder = VideoDecoder::Open(Input::Memory(*bytes, "preview.png"));
  ASSERT_OK(decoder);
  EXPECT_EQ((*decoder)->info().codec, "apng");
  int n = 0;
  ASSERT_OK((*decoder)->ForEachFrame([&](Frame&& f) {
    const Frame want = GradientFrame(33, 21, n++);
    EXPECT_EQ(f.data, want.data) << "frame " << n - 1;
    return Status::Ok();
  }));
  EXPECT_EQ(n, 5);
}

TEST(EncoderTest, FfprobeAcceptsTheFile) {
  if (!testing::HaveFfmpegCli()) GTEST_SKIP() << "no ffmpeg command line";
  auto bytes = Encode(Small(), 64);
  ASSERT_OK(bytes);
  char path[] = "/tmp/reel-media-encoder-XXXXXX.mp4";
  int fd = ::mkstemps(path, 4);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  }
  auto out = testing::RunCommand(
      "ffprobe -v error -select_streams v:0 -count_frames "
      "-show_entries stream=codec_name,width,height,nb_read_frames,"
      "nb_frames -of default=nw=1 " +
      std::string(path) + " 2>&1");
  std::remove(path);
  ASSERT_OK(out);
  EXPECT_NE(out->find("codec_name=h264"), std::string::npos) << *out;
  EXPECT_NE(out->find("width=96"), std::string::npos) << *out;
  EXPECT_NE(out->find("height=72"), std::string::npos) << *out;
  EXPECT_NE(out->find("nb_frames=64"), std::string::npos) << *out;
  EXPECT_NE(out->find("nb_read_frames=64"), std::string::npos) << *out;
  // -v error printed nothing else: no warnings about the file.
  EXPECT_EQ(out->find("rror"), std::string::npos) << *out;
}

TEST(EncoderTest, OddSizesArePaddedToEven) {
  EncoderOptions options = Small();
  options.width = 97;
  options.height = 71;
  auto bytes = Encode(options, 8);
  ASSERT_OK(bytes);
  auto decoder = VideoDecoder::Open(Input::Memory(*bytes, "odd.mp4"));
  ASSERT_OK(decoder);
  EXPECT_EQ((*decoder)->info().width, 98);
  EXPECT_EQ((*decoder)->info().height, 72);
  auto f = (*decoder)->DecodeFrame(5);
  ASSERT_OK(f);
  auto visible = Crop(*f, 0, 0, 97, 71);
  ASSERT_OK(visible);
  EXPECT_GT(Compare(*visible, GradientFrame(97, 71, 5)).psnr, kMinPsnr);
}

TEST(EncoderTest, OtherContainersAndDefaults) {
  EncoderOptions options = Small();
  options.container = "matroska";
  options.gop = 0;  // libx264's default interval: one keyframe in 24 frames
  options.crf = 18;
  options.preset = "ultrafast";
  options.fps_num = 30000;
  options.fps_den = 1001;
  options.threads = 2;
  auto bytes = Encode(options, 24);
  ASSERT_OK(bytes);
  auto info = Probe(Input::Memory(*bytes, "clip.mkv"));
  ASSERT_OK(info);
  EXPECT_EQ(info->container, "matroska,webm");
  EXPECT_EQ(info->frame_count, 24);
  EXPECT_EQ(info->keyframes, (std::vector<int64_t>{0}));
  EXPECT_NEAR(info->frame_rate.value(), 29.97, 0.01);
}

TEST(EncoderTest, OneThreadIsDeterministic) {
  // Whatever garbage the heap holds: glibc's M_PERTURB fills fresh allocations with a pattern.
  // x264's AVX-512 lookahead read such garbage at 112x112 before the encoder kept it on AVX2.
  EncoderOptions options = Small();
  options.width = 112;
  options.height = 112;
  std::string runs[3];
  const int patterns[3] = {0, 0xa5, 0x3c};
  for (int k = 0; k < 3; ++k) {
    mallopt(M_PERTURB, patterns[k]);
    auto bytes = Encode(options, 30);
    mallopt(M_PERTURB, 0);
    ASSERT_OK(bytes);
    runs[k] = std::move(*bytes);
  }
  EXPECT_TRUE(runs[0] == runs[1]) << "encodes differ with heap pattern 0xa5";
  EXPECT_TRUE(runs[0] == runs[2]) << "encodes differ with heap pattern 0x3c";
}

TEST(EncoderTest, ZeroFramesStillMakeAFile) {
  auto encoder = VideoEncoder::Create(Small());
  ASSERT_OK(encoder);
  auto bytes = (*encoder)->Finish();
  ASSERT_OK(bytes);
  EXPECT_FALSE(bytes->empty());
}

TEST(EncoderTest, DroppingAnUnfinishedEncoderIsClean) {
  // Nothing to assert beyond "no leak, no crash": media_asan_test checks the leak.
  auto encoder = VideoEncoder::Create(Small());
  ASSERT_OK(encoder);
  ASSERT_OK((*encoder)->Add(GradientFrame(96, 72, 0)));
}

TEST(EncoderErrorsTest, BadOptionsAreInvalidArgument) {
  auto code = [](EncoderOptions o) { return VideoEncoder::Create(o).status().code(); };
  EncoderOptions o = Small();
  o.width = 0;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.fps_den = 0;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.crf = 52;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.gop = -1;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.preset = "warp-speed";
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.container = "no-such-muxer";
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.container = "wav";  // cannot hold video
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.input = PixelFormat::kGray8;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.color_matrix = 99;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o.color_matrix = 0;  // GBR, not YUV
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o = Small();
  o.codec = "apng";
  o.container = "apng";
  o.input = PixelFormat::kYuv420p;
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
}

TEST(EncoderErrorsTest, AnUnknownCodecIsInvalidArgument) {
  EncoderOptions options = Small();
  options.codec = "vp9";
  EXPECT_STATUS(VideoEncoder::Create(options).status(), StatusCode::kInvalidArgument);
}

TEST(EncoderErrorsTest, MisuseIsReported) {
  auto encoder = VideoEncoder::Create(Small());
  ASSERT_OK(encoder);
  EXPECT_STATUS((*encoder)->Add(GradientFrame(95, 72, 0)), StatusCode::kInvalidArgument);
  Frame yuv = Frame::Make(96, 72, PixelFormat::kYuv420p);
  EXPECT_STATUS((*encoder)->Add(yuv), StatusCode::kInvalidArgument);
  Frame short_data = GradientFrame(96, 72, 0);
  short_data.data.resize(100);
  EXPECT_STATUS((*encoder)->Add(short_data), StatusCode::kInvalidArgument);
  ASSERT_OK((*encoder)->Add(GradientFrame(96, 72, 0)));
  ASSERT_OK((*encoder)->Finish());
  EXPECT_STATUS((*encoder)->Add(GradientFrame(96, 72, 1)), StatusCode::kFailedPrecondition);
  EXPECT_STATUS((*encoder)->Finish(), StatusCode::kFailedPrecondition);
}

TEST(EncoderErrorsTest, YuvFramesMustMatchTheEncodersColour) {
  EncoderOptions options = Small();
  options.input = PixelFormat::kYuv420p;
  options.color_matrix = 1;
  auto encoder = VideoEncoder::Create(options);
  ASSERT_OK(encoder);
  EXPECT_STATUS((*encoder)->Add(GradientFrame(96, 72, 0)), StatusCode::kInvalidArgument);
  Frame yuv = Frame::Make(96, 72, PixelFormat::kYuv420p);
  EXPECT_STATUS((*encoder)->Add(yuv), StatusCode::kInvalidArgument);  // matrix 2, not 1
  yuv.color_matrix = 1;
  yuv.full_range = true;
  EXPECT_STATUS((*encoder)->Add(yuv), StatusCode::kInvalidArgument);
  yuv.full_range = false;
  yuv.data.resize(100);
  EXPECT_STATUS((*encoder)->Add(yuv), StatusCode::kInvalidArgument);
  yuv.data.resize(Frame::ByteSize(96, 72, PixelFormat::kYuv420p));
  ASSERT_OK((*encoder)->Add(yuv));
  ASSERT_OK((*encoder)->Finish());
}

}  // namespace
}  // namespace reel::media
