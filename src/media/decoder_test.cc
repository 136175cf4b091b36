// VideoDecoder: the seek strategy and its statistics, request order and duplicates, times, the
// sequential API, output options, inputs, threads, and errors. (Random access against sequential
// decoding on every shared video is in shared_videos_test.cc.)
#include "media/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "base/files.h"
#include "media/demuxer.h"
#include "media/encoder.h"
#include "media/scaler.h"
#include "media/testing/media_testing.h"
#include "testing/status_matchers.h"

namespace reel::media {
namespace {

using testing::Compare;
using testing::ReadFileOrEmpty;
using testing::SharedVideo;

std::unique_ptr<VideoDecoder> MustOpen(const Input& input, const DecodeOptions& options = {}) {
  auto decoder = VideoDecoder::Open(input, options);
  EXPECT_OK(decoder);
  return decoder.ok() ? std::move(decoder).value() : nullptr;
}

// Every frame of the video, decoded in one pass.
std::vector<Frame> DecodeAll(const std::string& file, const DecodeOptions& options = {}) {
  auto decoder = MustOpen(Input::File(SharedVideo(file)), options);
  std::vector<Frame> frames;
  if (!decoder) return frames;
  Status s = decoder->ForEachFrame([&](Frame&& f) {
    frames.push_back(std::move(f));
    return Status::Ok();
  });
  EXPECT_OK(s);
  return frames;
}

TEST(SeekStrategyTest, DecodesInFileOrderAndSeeksOnlyPastAKeyframe) {
  // mmaction2_test.mp4: 300 frames, keyframes at 0 and 235.
  auto decoder = MustOpen(Input::File(SharedVideo("mmaction2_test.mp4")));
  ASSERT_TRUE(decoder);
  ASSERT_EQ(decoder->info().keyframes, (std::vector<int64_t>{0, 235}));
  const std::vector<int64_t> request = {5, 250, 10, 251};
  auto frames = decoder->DecodeFrames(request);
  ASSERT_OK(frames);
  ASSERT_EQ(frames->size(), 4u);
  for (size_t k = 0; k < request.size(); ++k) EXPECT_EQ((*frames)[k].index, request[k]);

  DecodeStats stats = decoder->stats();
  // 0..10 decoded from the start, one forward seek to keyframe 235, then 235..251 (plus the
  // B-frame reorder delay): never a packet twice, never backwards, far from the whole file.
  EXPECT_EQ(stats.seeks, 1);
  EXPECT_EQ(stats.backward_seeks, 0);
  EXPECT_EQ(stats.frames_returned, 4);
  EXPECT_LE(stats.packets_read, 11 + 17 + 8);
  EXPECT_LE(stats.frames_decoded, stats.packets_read);
  EXPECT_GE(stats.max_packet_index, 251);
  EXPECT_LT(stats.max_packet_index, 251 + 8);

  // Pixels equal to a full sequential decode's.
  std::vector<Frame> all = DecodeAll("mmaction2_test.mp4");
  ASSERT_EQ(all.size(), 300u);
  for (size_t k = 0; k < request.size(); ++k) {
    EXPECT_EQ((*frames)[k].data, all[request[k]].data) << "frame " << request[k];
  }

  // Going back costs a backward seek and still gives the right picture.
  auto back = decoder->DecodeFrame(7);
  ASSERT_OK(back);
  EXPECT_EQ(back->data, all[7].data);
  EXPECT_EQ(decoder->stats().backward_seeks, 1);
}

TEST(SeekStrategyTest, NearbyFramesDecodeForwardWithoutSeeking) {
  auto decoder = MustOpen(Input::File(SharedVideo("decord_flipping_a_pancake.mkv")));
  ASSERT_TRUE(decoder);  // keyframes 0, 150, 300
  ASSERT_OK(decoder->DecodeFrames({10, 20, 140}));
  EXPECT_EQ(decoder->stats().seeks, 0);
  ASSERT_OK(decoder->DecodeFrames({160}));  // past keyframe 150: a seek pays off
  EXPECT_EQ(decoder->stats().seeks, 1);
  ASSERT_OK(decoder->DecodeFrames({170, 299}));  // keyframe 150 already behind us
  EXPECT_EQ(decoder->stats().seeks, 1);
  decoder->ResetStats();
  EXPECT_EQ(decoder->stats().seeks, 0);
}

// Containers none of the shared videos use, made by VideoEncoder: a raw H.264 elementary stream
// (no timestamps at all: frames are counted) and MPEG-TS (seeks by byte search).
class OtherContainerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OtherContainerTest, RandomAccessMatchesSequential) {
  EncoderOptions eo;
  eo.width = 64;
  eo.height = 48;
  eo.gop = 12;
  eo.container = GetParam();
  auto encoder = VideoEncoder::Create(eo);
  ASSERT_OK(encoder);
  for (int t = 0; t < 48; ++t) ASSERT_OK((*encoder)->Add(testing::GradientFrame(64, 48, t)));
  auto bytes = (*encoder)->Finish();
  ASSERT_OK(bytes);
  Input input = Input::Memory(*bytes, std::string("clip.") + GetParam());

  auto sequential = MustOpen(input);
  ASSERT_TRUE(sequential);
  EXPECT_EQ(sequential->info().frame_count, 48);
  std::vector<Frame> all;
  ASSERT_OK(sequential->ForEachFrame([&](Frame&& f) {
    all.push_back(std::move(f));
    return Status::Ok();
  }));
  ASSERT_EQ(all.size(), 48u);
  for (int t : {0, 20, 47}) {
    EXPECT_GT(Compare(all[t], testing::GradientFrame(64, 48, t)).psnr, 30.0) << "frame " << t;
  }
  auto random = MustOpen(input);
  ASSERT_TRUE(random);
  const std::vector<int64_t> request = {40, 3, 25, 13, 47, 0};
  auto frames = random->DecodeFrames(request);
  ASSERT_OK(frames);
  for (size_t k = 0; k < request.size(); ++k) {
    EXPECT_EQ((*frames)[k].data, all[request[k]].data) << "frame " << request[k];
  }
  for (int64_t i : {30, 5}) {  // backwards
    auto f = random->DecodeFrame(i);
    ASSERT_OK(f);
    EXPECT_EQ(f->data, all[i].data) << "frame " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Containers, OtherContainerTest,
                         ::testing::Values("h264", "mpegts", "matroska", "avi"));

// The loader opens a shard's clips naming the container and without stream analysis. A clip as
// ingest writes it (x264 with B-frames, MP4) and the shared MP4 / MOV videos (rotated, edit
// lists, an unordered and a damaged one among them) must give the same frames and the same
// description either way, sequentially and by random access.
TEST(DecoderTest, AKnownContainerWithoutAnalysisDecodesTheSameFrames) {
  EncoderOptions eo;
  eo.width = 112;
  eo.height = 112;
  eo.container = "mp4";
  auto encoder = VideoEncoder::Create(eo);
  ASSERT_OK(encoder);
  for (int t = 0; t < 8; ++t) ASSERT_OK((*encoder)->Add(testing::GradientFrame(112, 112, t)));
  auto clip = (*encoder)->Finish();
  ASSERT_OK(clip);
  std::vector<std::pair<std::string, std::string>> inputs = {{"clip.mp4", *clip}};
  for (const char* file : {"mmaction2_demo.mp4", "decord_video_90.mov", "decord_unordered.mov",
                           "torchcodec_nasa_13013_rotated.mp4", "torchcodec_h265_video.mp4",
                           "torchcodec_discard_first_keyframe.mp4",
                           "torchcodec_test_non_zero_start.mp4", "decord_corrupted.mp4"}) {
    inputs.emplace_back(file, ReadFileOrEmpty(SharedVideo(file)));
  }
  DecodeOptions known;
  known.container = "mp4";
  known.analyze_streams = false;
  known.parse_packets = false;
  known.skip_corrupt = true;
  DecodeOptions probed;
  probed.skip_corrupt = true;
  for (const auto& [name, bytes] : inputs) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(bytes.empty());
    auto expected = MustOpen(Input::View(bytes, name), probed);
    auto fast = MustOpen(Input::View(bytes, name), known);
    ASSERT_TRUE(expected && fast);
    const VideoInfo& a = expected->info();
    const VideoInfo& b = fast->info();
    EXPECT_EQ(b.frame_count, a.frame_count);
    EXPECT_EQ(b.frame_pts, a.frame_pts);
    EXPECT_EQ(b.keyframes, a.keyframes);
    EXPECT_EQ(b.frame_rate.num * a.frame_rate.den, a.frame_rate.num * b.frame_rate.den);
    EXPECT_EQ(std::tie(b.width, b.height, b.rotation, b.codec),
              std::tie(a.width, a.height, a.rotation, a.codec));
    EXPECT_EQ(b.pixel_format, "");
    std::vector<Frame> want, got;
    for (auto [decoder, out] : {std::pair{expected.get(), &want}, std::pair{fast.get(), &got}}) {
      ASSERT_OK(decoder->ForEachFrame([out = out](Frame&& f) {
        out->push_back(std::move(f));
        return Status::Ok();
      }));
    }
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].index, want[i].index);
      ASSERT_EQ(got[i].data, want[i].data) << "frame " << got[i].index;
    }
    if (name == "decord_corrupted.mp4") continue;  // random access fails on its bad packets
    auto again = MustOpen(Input::View(bytes, name), known);
    ASSERT_TRUE(again);
    const int64_t last = want.back().index;
    auto picked = again->DecodeFrames({last, want.front().index});
    ASSERT_OK(picked);
    EXPECT_EQ((*picked)[0].data, want.back().data);
    EXPECT_EQ((*picked)[1].data, want.front().data);
  }
}

// An MP4 clip of 8 frames as ingest writes them: a moving gradient from step `from`, the same
// frame 8 times (still), or noise, which x264 codes with different numbers of B-frames, so the
// clips' reorder delays (video_delay) differ.
enum class ClipKind { kMoving, kStill, kNoise };
std::string GradientClip(int width, int height, int from, ClipKind kind = ClipKind::kMoving) {
  EncoderOptions eo;
  eo.width = width;
  eo.height = height;
  eo.container = "mp4";
  auto encoder = VideoEncoder::Create(eo);
  EXPECT_OK(encoder);
  if (!encoder.ok()) return "";
  std::mt19937 rng(static_cast<unsigned>(from));
  for (int t = from; t < from + 8; ++t) {
    Frame f = testing::GradientFrame(width, height, kind == ClipKind::kStill ? from : t);
    if (kind == ClipKind::kNoise) {
      for (auto& v : f.data) v = static_cast<uint8_t>(rng());
    }
    EXPECT_OK((*encoder)->Add(f));
  }
  auto bytes = (*encoder)->Finish();
  EXPECT_OK(bytes);
  return bytes.ok() ? *bytes : "";
}

// Every frame of a memory input; `reused` receives whether its decoder was a kept one.
std::vector<Frame> DecodeAllOf(const std::string& bytes, const DecodeOptions& options,
                               bool* reused = nullptr, int64_t stop_after = -1) {
  auto decoder = MustOpen(Input::View(bytes, "clip.mp4"), options);
  std::vector<Frame> frames;
  if (!decoder) return frames;
  if (reused != nullptr) *reused = decoder->stats().decoder_reused;
  EXPECT_OK(decoder->ForEachFrame(
      [&](Frame&& f) {
        frames.push_back(std::move(f));
        return Status::Ok();
      },
      0, stop_after));
  return frames;
}

// The loader's workers open clip after clip with reuse_on_thread. A kept decoder must decode the
// next clip exactly as a fresh one, also after one left half-way (frames still inside it), and
// only for equal stream parameters and on its own thread.
TEST(DecoderTest, ADecoderReusedOnItsThreadDecodesAsAFreshOne) {
  std::vector<std::string> clips;
  for (int from : {0, 40, 90, 200}) clips.push_back(GradientClip(112, 112, from));
  for (int from : {3, 5}) clips.push_back(GradientClip(112, 112, from, ClipKind::kStill));
  for (int from : {7, 9}) clips.push_back(GradientClip(112, 112, from, ClipKind::kNoise));
  std::set<int> delays;
  for (const auto& clip : clips) {
    auto demuxer = internal::Demuxer::Open(Input::View(clip, "clip.mp4"), -1, {"mp4", false});
    ASSERT_OK(demuxer);
    delays.insert((*demuxer)->stream()->codecpar->video_delay);
  }
  EXPECT_GE(delays.size(), 2u) << "the clips should need different reorder delays";
  const std::string other_size = GradientClip(64, 48, 7);
  DecodeOptions fresh;
  DecodeOptions reuse;
  reuse.reuse_on_thread = true;
  std::vector<std::vector<Frame>> want;
  want.reserve(clips.size());
  for (const auto& clip : clips) want.push_back(DecodeAllOf(clip, fresh));

  bool reused = true;
  (void)DecodeAllOf(clips[3], reuse, &reused, /*stop_after=*/3);  // left with frames inside
  EXPECT_FALSE(reused);                                           // nothing kept yet on this thread
  for (size_t i : {0, 1, 2, 4, 6, 5, 7, 0, 6, 1}) {
    std::vector<Frame> got = DecodeAllOf(clips[i], reuse, &reused);
    EXPECT_TRUE(reused) << "clip " << i;
    ASSERT_EQ(got.size(), 8u);
    for (size_t f = 0; f < got.size(); ++f) {
      EXPECT_EQ(got[f].data, want[i][f].data) << "clip " << i << " frame " << f;
    }
  }
  auto picked = MustOpen(Input::View(clips[1], "clip.mp4"), reuse);
  ASSERT_TRUE(picked);
  EXPECT_TRUE(picked->stats().decoder_reused);
  auto frames = picked->DecodeFrames({7, 2});
  ASSERT_OK(frames);
  EXPECT_EQ((*frames)[0].data, want[1][7].data);
  EXPECT_EQ((*frames)[1].data, want[1][2].data);
  picked.reset();

  EXPECT_EQ(DecodeAllOf(other_size, reuse, &reused).size(), 8u);
  EXPECT_FALSE(reused);  // another size: a context of its own, kept beside the first
  EXPECT_EQ(DecodeAllOf(clips[0], reuse, &reused).size(), 8u);
  EXPECT_TRUE(reused);
  for (int width : {32, 48, 80, 96}) {  // four more sizes push the 112x112 one out
    EXPECT_EQ(DecodeAllOf(GradientClip(width, 48, 1), reuse, &reused).size(), 8u);
    EXPECT_FALSE(reused) << width;
  }
  EXPECT_EQ(DecodeAllOf(clips[0], reuse, &reused).size(), 8u);
  EXPECT_FALSE(reused);
  std::thread([&] {
    bool elsewhere = true;
    EXPECT_EQ(DecodeAllOf(clips[2], reuse, &elsewhere).size(), 8u);
    EXPECT_FALSE(elsewhere);  // this thread's spare is not another's
  }).join();
  EXPECT_EQ(DecodeAllOf(clips[2], fresh, &reused).size(), 8u);
  EXPECT_FALSE(reused);  // without the option nothing is taken
  std::vector<Frame> last = DecodeAllOf(clips[2], reuse, &reused);
  EXPECT_TRUE(reused);
  ASSERT_EQ(last.size(), 8u);
  EXPECT_EQ(last[5].data, want[2][5].data);
}

TEST(DecoderErrorsTest, AWrongContainerIsAClearError) {
  const std::string mkv = ReadFileOrEmpty(SharedVideo("decord_flipping_a_pancake.mkv"));
  ASSERT_FALSE(mkv.empty());
  DecodeOptions as_mp4;
  as_mp4.container = "mp4";
  as_mp4.analyze_streams = false;
  as_mp4.parse_packets = false;
  auto wrong = VideoDecoder::Open(Input::View(mkv, "pancake.mkv"), as_mp4);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("pancake.mkv"), std::string::npos)
      << wrong.status().ToString();
  DecodeOptions unknown;
  unknown.container = "no-such-container";
  auto none = VideoDecoder::Open(Input::View(mkv, "pancake.mkv"), unknown);
  EXPECT_STATUS(none, StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no-such-container"), std::string::npos);
  EXPECT_STATUS(VideoDecoder::Open(Input::Memory(std::string(1000, '\1'), "x.mp4"), as_mp4),
                StatusCode::kDataLoss);
}

TEST(DecoderTest, RequestOrderAndDuplicates) {
  auto decoder = MustOpen(Input::File(SharedVideo("mmaction2_rawvideo_dataset_part_0.mp4")));
  ASSERT_TRUE(decoder);
  auto frames = decoder->DecodeFrames({3, 1, 3, 0});
  ASSERT_OK(frames);
  ASSERT_EQ(frames->size(), 4u);
  EXPECT_EQ((*frames)[0].index, 3);
  EXPECT_EQ((*frames)[1].index, 1);
  EXPECT_EQ((*frames)[2].index, 3);
  EXPECT_EQ((*frames)[3].index, 0);
  EXPECT_EQ((*frames)[0].data, (*frames)[2].data);
  EXPECT_NE((*frames)[0].data, (*frames)[1].data);
  EXPECT_EQ(decoder->stats().frames_returned, 3);  // each distinct frame decoded once
  auto none = decoder->DecodeFrames({});
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

TEST(DecoderTest, DecodeAtPicksTheNearestFrame) {
  // Timestamps start at 8.33 s in the file; times here count from the first frame.
  auto decoder = MustOpen(Input::File(SharedVideo("torchcodec_test_non_zero_start.mp4")));
  ASSERT_TRUE(decoder);
  auto frames = decoder->DecodeAt({0.0, 0.1, 0.049, 0.39});
  ASSERT_OK(frames);
  EXPECT_EQ((*frames)[0].index, 0);
  EXPECT_EQ((*frames)[1].index, 3);
  EXPECT_EQ((*frames)[2].index, 1);  // 1.47 frames
  EXPECT_EQ((*frames)[3].index, 11);
  EXPECT_DOUBLE_EQ((*frames)[0].timestamp_s, 0.0);
  EXPECT_NEAR((*frames)[1].timestamp_s, 0.1, 1e-9);
  EXPECT_STATUS(decoder->DecodeAt({-0.5}), StatusCode::kOutOfRange);
  EXPECT_STATUS(decoder->DecodeAt({5.0}), StatusCode::kOutOfRange);
}

TEST(DecoderTest, OutOfRangeIndicesAreInvalidArgument) {
  auto decoder = MustOpen(Input::File(SharedVideo("decord_video_0.mov")));
  ASSERT_TRUE(decoder);
  EXPECT_STATUS(decoder->DecodeFrame(3), StatusCode::kInvalidArgument);
  EXPECT_STATUS(decoder->DecodeFrames({0, -1}), StatusCode::kInvalidArgument);
  EXPECT_STATUS(decoder->SeekToFrame(4), StatusCode::kInvalidArgument);
  EXPECT_OK(decoder->DecodeFrame(2));
}

TEST(DecoderTest, ReadNextContinuesAfterTheLastDecodedFrame) {
  auto decoder = MustOpen(Input::File(SharedVideo("torchcodec_h265_video.mp4")));  // 10 frames
  ASSERT_TRUE(decoder);
  auto first = decoder->ReadNext();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->index, 0);
  ASSERT_OK(decoder->DecodeFrames({6, 4}));
  auto next = decoder->ReadNext();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->index, 7);
  ASSERT_OK(decoder->SeekToFrame(9));
  next = decoder->ReadNext();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->index, 9);
  next = decoder->ReadNext();
  ASSERT_OK(next);
  EXPECT_FALSE(next->has_value());
  ASSERT_OK(decoder->SeekToFrame(10));  // one past the end is allowed: nothing left
  EXPECT_FALSE(decoder->ReadNext()->has_value());
}

TEST(DecoderTest, ForEachFrameRangeAndStop) {
  auto decoder = MustOpen(Input::File(SharedVideo("mmaction2_rawvideo_dataset_part_0.mp4")));
  ASSERT_TRUE(decoder);
  std::vector<int64_t> seen;
  ASSERT_TRUE(decoder
                  ->ForEachFrame(
                      [&](Frame&& f) {
                        seen.push_back(f.index);
                        return Status::Ok();
                      },
                      10, 14)
                  .ok());
  EXPECT_EQ(seen, (std::vector<int64_t>{10, 11, 12, 13}));
  int calls = 0;
  Status s = decoder->ForEachFrame(
      [&](Frame&&) { return ++calls == 3 ? CancelledError("enough") : Status::Ok(); });
  EXPECT_STATUS(s, StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
}

TEST(DecoderTest, ResizeCropAndFormats) {
  const std::string path = SharedVideo("mmaction2_test.mp4");  // 340x256
  DecodeOptions options;
  options.short_side = 32;
  auto small = MustOpen(Input::File(path), options);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->output_width(), 42);
  EXPECT_EQ(small->output_height(), 32);
  auto f = small->DecodeFrame(100);
  ASSERT_OK(f);
  EXPECT_EQ(f->width, 42);
  EXPECT_EQ(f->height, 32);
  EXPECT_EQ(f->data.size(), 42u * 32u * 3u);

  options.crop_width = 24;
  options.crop_height = 20;
  auto cropped = MustOpen(Input::File(path), options);
  ASSERT_TRUE(cropped);
  auto c = cropped->DecodeFrame(100);
  ASSERT_OK(c);
  auto expected = CenterCrop(*f, 24, 20);
  ASSERT_OK(expected);
  EXPECT_EQ(c->data, expected->data);

  DecodeOptions exact;
  exact.width = 64;
  exact.height = 48;
  exact.interpolation = Interpolation::kArea;
  exact.format = PixelFormat::kGray8;
  auto gray = MustOpen(Input::File(path), exact);
  ASSERT_TRUE(gray);
  auto g = gray->DecodeFrame(0);
  ASSERT_OK(g);
  EXPECT_EQ(g->format, PixelFormat::kGray8);
  EXPECT_EQ(g->data.size(), 64u * 48u);

  // Resized YUV420P goes through swscale and is close to the resized RGB.
  DecodeOptions yuv;
  yuv.format = PixelFormat::kYuv420p;
  yuv.width = 170;
  yuv.height = 128;
  auto y = MustOpen(Input::File(path), yuv);
  ASSERT_TRUE(y);
  auto yf = y->DecodeFrame(0);
  ASSERT_OK(yf);
  EXPECT_EQ(yf->data.size(), Frame::ByteSize(170, 128, PixelFormat::kYuv420p));
}

TEST(DecoderTest, ResizeOfARotatedVideoIsInDisplayOrientation) {
  const std::string path = SharedVideo("decord_video_90.mov");  // 568x320, shown as 320x568
  DecodeOptions options;
  options.short_side = 64;
  auto decoder = MustOpen(Input::File(path), options);
  ASSERT_TRUE(decoder);
  EXPECT_EQ(decoder->output_width(), 64);
  EXPECT_EQ(decoder->output_height(), 113);
  auto small = decoder->DecodeFrame(1);
  ASSERT_OK(small);
  // The same as turning the full frame and resizing it (up to rounding in the scaler).
  auto full = MustOpen(Input::File(path))->DecodeFrame(1);
  ASSERT_OK(full);
  ASSERT_EQ(full->width, 320);
  auto resized = Resize(*full, 64, 113);
  ASSERT_OK(resized);
  auto d = Compare(*small, *resized);
  EXPECT_LT(d.mean_abs, 2.0);
  EXPECT_GT(d.psnr, 30.0);

  DecodeOptions stored;
  stored.autorotate = false;
  auto raw = MustOpen(Input::File(path), stored);
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->output_width(), 568);
  auto r = raw->DecodeFrame(1);
  ASSERT_OK(r);
  EXPECT_EQ(Orient(*r, Orientation::Rotation(90)).data, full->data);
}

TEST(DecoderTest, FrameThreadingGivesTheSamePixels) {
  const std::string path = SharedVideo("mmaction2_demo.mp4");
  const std::vector<int64_t> request = {0, 57, 140, 279};
  auto single = MustOpen(Input::File(path));
  ASSERT_TRUE(single);
  auto expected = single->DecodeFrames(request);
  ASSERT_OK(expected);
  for (int threads : {0, 3}) {
    DecodeOptions options;
    options.threads = threads;
    auto decoder = MustOpen(Input::File(path), options);
    ASSERT_TRUE(decoder);
    auto frames = decoder->DecodeFrames(request);
    ASSERT_OK(frames);
    for (size_t k = 0; k < request.size(); ++k) {
      EXPECT_EQ((*frames)[k].data, (*expected)[k].data)
          << threads << " threads, frame " << request[k];
    }
  }
}

TEST(DecoderTest, SmallFramesDecodeOnOneThreadWhenAsked) {
  DecodeOptions options;
  options.threads = 2;
  auto plain = MustOpen(Input::File(SharedVideo("mmaction2_demo.mp4")), options);  // 340x256
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->threads(), 2);
  options.frame_threads_min_pixels = 340 * 256 + 1;
  auto small = MustOpen(Input::File(SharedVideo("mmaction2_demo.mp4")), options);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->threads(), 1);
  options.frame_threads_min_pixels = 340 * 256;
  auto at_the_limit = MustOpen(Input::File(SharedVideo("mmaction2_demo.mp4")), options);
  ASSERT_TRUE(at_the_limit);
  EXPECT_EQ(at_the_limit->threads(), 2);
  auto frames = small->DecodeFrames({0, 100});
  ASSERT_OK(frames);
  auto expected = plain->DecodeFrames({0, 100});
  ASSERT_OK(expected);
  EXPECT_EQ((*frames)[1].data, (*expected)[1].data);
}

// Every frame of a full-range BT.709 video is converted with its own matrix and range, not only
// the first: swscale added flags of its own to a resizing RGB24 context and renamed the "J"
// format it was given, so the cached context never matched again and each later frame got a fresh
// one without the colour details (BT.601, limited range: up to 40 levels off here). A fresh
// decoder's first frame is the reference; RGB and YUV, resized and not.
TEST(DecoderTest, EveryFrameKeepsTheVideosColours) {
  auto video = testing::FullRangeBt709Video(160, 120, 12);
  ASSERT_OK(video);
  for (const PixelFormat format : {PixelFormat::kRgb24, PixelFormat::kYuv420p}) {
    for (const int short_side : {0, 112}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(format)) + " " + std::to_string(short_side));
      DecodeOptions options;
      options.format = format;
      options.short_side = short_side;
      auto decoder = VideoDecoder::Open(Input::View(*video, "full.mp4"), options);
      ASSERT_OK(decoder);
      std::vector<Frame> frames;
      ASSERT_OK((*decoder)->ForEachFrame([&](Frame&& f) {
        frames.push_back(std::move(f));
        return Status::Ok();
      }));
      ASSERT_EQ(frames.size(), 12u);
      for (int64_t i : {int64_t{1}, int64_t{5}, int64_t{11}}) {
        auto fresh = VideoDecoder::Open(Input::View(*video, "full.mp4"), options);
        ASSERT_OK(fresh);
        auto frame = (*fresh)->DecodeFrame(i);
        ASSERT_OK(frame);
        EXPECT_EQ(Compare(frames[i], *frame).max_abs, 0) << "frame " << i;
        EXPECT_EQ(frames[i].color_matrix, frame->color_matrix);
        EXPECT_EQ(frames[i].full_range, frame->full_range);
      }
      if (format == PixelFormat::kYuv420p) {
        // The picture keeps its matrix; swscale (resizing) writes limited range.
        EXPECT_EQ(frames[0].color_matrix, 1);
        EXPECT_EQ(frames[0].full_range, short_side == 0);
      }
    }
  }
}

// Each colour matrix and range the encoder can tag, decoded to RGB, within the tolerance of the
// shared videos against the ffmpeg command line (whose scale filter reads the same tags): BT.2020
// was read as BT.601 (up to 16 levels off here) until the converter passed it to swscale.
TEST(DecoderTest, TaggedColoursDecodeLikeFfmpeg) {
  if (!testing::HaveFfmpegCli()) GTEST_SKIP() << "no ffmpeg command line";
  reel::testing::TempDir temp;
  for (const int matrix : {1, 6, 9}) {
    for (const bool full_range : {false, true}) {
      SCOPED_TRACE("matrix " + std::to_string(matrix) + (full_range ? ", full" : ", limited"));
      auto video = testing::TaggedVideo(96, 64, 4, matrix, full_range);
      ASSERT_OK(video);
      const std::string path = temp.path() + "/tagged.mp4";
      ASSERT_OK(WriteFileAtomically(path, *video));
      auto decoder = VideoDecoder::Open(Input::File(path));
      ASSERT_OK(decoder);
      const std::vector<int64_t> indices = {0, 3};
      auto ours = (*decoder)->DecodeFrames(indices);
      ASSERT_OK(ours);
      auto reference = testing::FfmpegFrames(path, (*decoder)->info().stream_index, indices,
                                             {{PixelFormat::kRgb24, true, 96, 64}});
      ASSERT_OK(reference);
      for (size_t k = 0; k < indices.size(); ++k) {
        const auto d = Compare((*ours)[k], (*reference)[0][k]);
        EXPECT_LE(d.max_abs, 2) << "frame " << indices[k];
        EXPECT_LE(d.mean_abs, 0.5) << "frame " << indices[k];
      }
    }
  }
}

TEST(DecoderTest, MemoryInputOutlivesTheCallersBytes) {
  auto bytes = std::make_shared<const std::string>(
      ReadFileOrEmpty(SharedVideo("mmaction2_rawvideo_dataset_part_0.mp4")));
  ASSERT_FALSE(bytes->empty());
  std::unique_ptr<VideoDecoder> decoder;
  {
    Input input = Input::Memory(bytes, "raw/part0.mp4");
    bytes.reset();  // the Input (and then the decoder) keeps them alive
    decoder = MustOpen(input);
  }
  ASSERT_TRUE(decoder);
  auto f = decoder->DecodeFrames({31, 0});
  ASSERT_OK(f);
  EXPECT_EQ(decoder->info().name, "raw/part0.mp4");
}

TEST(DecoderTest, ConcurrentDecodersOfOneInput) {
  Input input = Input::Memory(ReadFileOrEmpty(SharedVideo("mmaction2_demo.mp4")), "demo.mp4");
  const std::vector<int64_t> request = {3, 100, 200};
  auto reference = MustOpen(input);
  ASSERT_TRUE(reference);
  auto expected = reference->DecodeFrames(request);
  ASSERT_OK(expected);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto decoder = VideoDecoder::Open(input);
      if (!decoder.ok()) return;
      auto frames = (*decoder)->DecodeFrames(request);
      if (!frames.ok()) return;
      bool same = true;
      for (size_t k = 0; k < request.size(); ++k) same &= (*frames)[k].data == (*expected)[k].data;
      ok[t] = same ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

TEST(DecoderErrorsTest, BadOptionsAreInvalidArgument) {
  const Input input = Input::File(SharedVideo("decord_video_0.mov"));
  DecodeOptions width_only;
  width_only.width = 10;
  EXPECT_STATUS(VideoDecoder::Open(input, width_only), StatusCode::kInvalidArgument);
  DecodeOptions both;
  both.width = 10;
  both.height = 10;
  both.short_side = 5;
  EXPECT_STATUS(VideoDecoder::Open(input, both), StatusCode::kInvalidArgument);
  DecodeOptions big_crop;
  big_crop.crop_width = 1000;
  big_crop.crop_height = 10;
  EXPECT_STATUS(VideoDecoder::Open(input, big_crop), StatusCode::kInvalidArgument);
  DecodeOptions threads;
  threads.threads = -1;
  EXPECT_STATUS(VideoDecoder::Open(input, threads), StatusCode::kInvalidArgument);
}

TEST(DecoderErrorsTest, MissingAndGarbageInputs) {
  EXPECT_STATUS(VideoDecoder::Open(Input::File("/nonexistent.mp4")), StatusCode::kNotFound);
  EXPECT_STATUS(VideoDecoder::Open(Input::Memory(std::string(1000, '\1'))), StatusCode::kDataLoss);
}

TEST(DecoderErrorsTest, TruncatedVideoIsDataLossNotACrash) {
  // torchcodec_testsrc2.mp4 has its index (moov) before the frames, so a cut copy still
  // promises all 60 frames: the scan finds fewer, the first frames decode, nothing crashes.
  std::string bytes = ReadFileOrEmpty(SharedVideo("torchcodec_testsrc2.mp4"));
  ASSERT_FALSE(bytes.empty());
  for (size_t keep : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 1000}) {
    auto decoder = VideoDecoder::Open(Input::Memory(bytes.substr(0, keep), "cut.mp4"));
    if (!decoder.ok()) {
      EXPECT_STATUS(decoder, StatusCode::kDataLoss) << decoder.status().ToString();
      continue;
    }
    int64_t n = (*decoder)->info().frame_count;
    ASSERT_GT(n, 0);
    auto first = (*decoder)->DecodeFrame(0);
    EXPECT_OK(first);
    Status s = (*decoder)->ForEachFrame([](Frame&&) { return Status::Ok(); });
    EXPECT_TRUE(s.ok() || s.code() == StatusCode::kDataLoss) << s.ToString();
  }
}

}  // namespace
}  // namespace reel::media
