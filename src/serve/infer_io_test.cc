#include "serve/infer_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>

#include "base/files.h"
#include "serve/sum_model_testing.h"
#include "serve/video.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait.h"

namespace reel::serve {
namespace {

using ::testing::ElementsAre;

constexpr auto kQueuedWait = std::chrono::seconds(20);

// The test video every case cuts (base/files.h reads it).
std::string TestVideo() {
  return ReadFileToString(reel::testing::SourcePath("testdata/videos/mmaction2_test.mp4"))
      .value_or(std::string());
}

// SumModel behind a batcher, recording each forward pass's batch size. `first_pass` runs at the
// start of the first forward pass (with the batcher at hand).
class Served {
 public:
  explicit Served(int max_batch, std::function<void(Batcher&)> first_pass = nullptr)
      : model_("sum"), first_pass_(std::move(first_pass)) {
    BatcherOptions options;
    options.max_batch = max_batch;
    auto forward = [this](int, const float* input, int64_t n) -> Result<std::vector<float>> {
      bool first = false;
      {
        std::lock_guard lock(mu_);
        first = passes_.empty();
        passes_.push_back(n);
      }
      if (first && first_pass_) first_pass_(*batcher_);
      return model_.Forward(input, n);
    };
    batcher_ =
        std::move(Batcher::Start(options, info().sample_size(), info().num_classes(), forward))
            .value();
  }

  const ModelInfo& info() const { return model_.info(); }
  Batcher& batcher() { return *batcher_; }
  std::vector<int64_t> passes() {
    std::lock_guard lock(mu_);
    return passes_;
  }

 private:
  SumModel model_;
  std::function<void(Batcher&)> first_pass_;
  std::unique_ptr<Batcher> batcher_;
  std::mutex mu_;
  std::vector<int64_t> passes_;
};

// The mean of SumModel's scores of the video's clips, computed from the cut alone.
std::vector<float> MeanClipScores(const std::string& video, const ModelInfo& info, int clips) {
  VideoSettings settings = info.video;
  settings.clips = clips;
  VideoSamples samples = VideoToSamples(video, "video", settings).value();
  const int64_t size = info.sample_size();
  float sum = 0;
  for (int64_t c = 0; c < samples.clips; ++c) {
    for (int64_t i = 0; i < size; ++i) sum += samples.input[c * size + i] / samples.clips;
  }
  return {sum, -sum, 0.f};
}

void ExpectScores(const Scores& scores, const std::vector<float>& want) {
  ASSERT_EQ(scores.logits.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(scores.logits[i], want[i], 1e-4);
}

TEST(ScoreVideos, ComputesALoneVideosFirstClipWhileTheRestIsDecoded) {
  const std::string video = TestVideo();
  ASSERT_FALSE(video.empty());
  // The first clip's forward pass waits for the next clip: only a clip sent on while the video
  // is still being decoded can arrive. Sent all together, the first pass holds every clip.
  bool overlapped = false;
  Served served(/*max_batch=*/8, [&](Batcher& batcher) {
    overlapped = reel::testing::WaitUntil([&] { return batcher.stats().queued >= 1; }, kQueuedWait);
  });
  VideoScoring how;
  how.clips = 3;
  how.timeline = true;
  const std::vector<std::string_view> videos = {video};
  ASSERT_OK_AND_ASSIGN(Scores scores, ScoreVideos(served.batcher(), served.info(), videos, how));
  EXPECT_TRUE(overlapped);
  EXPECT_EQ(served.passes().front(), 1);
  ExpectScores(scores, MeanClipScores(video, served.info(), 3));
  ASSERT_EQ(scores.timelines.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(scores.timelines[0]).size(), 3u);
}

TEST(ScoreVideos, ClipsGoTogetherWhileTheModelIsBusy) {
  const std::string video = TestVideo();
  ASSERT_FALSE(video.empty());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> busy;
  Served served(/*max_batch=*/8, [&](Batcher&) {
    busy.set_value();
    released.wait_for(kQueuedWait);
  });
  // Another request is in its forward pass while the video is decoded.
  BatchWork other;
  other.input.assign(static_cast<size_t>(served.info().sample_size()), 0.f);
  std::future<Result<BatchResult>> other_answer = served.batcher().Submit(std::move(other));
  ASSERT_EQ(busy.get_future().wait_for(kQueuedWait), std::future_status::ready);
  VideoScoring how;
  how.clips = 3;
  const std::vector<std::string_view> videos = {video};
  auto scores = std::async(std::launch::async, [&] {
    return ScoreVideos(served.batcher(), served.info(), videos, how);
  });
  ASSERT_TRUE(
      reel::testing::WaitUntil([&] { return served.batcher().stats().queued == 1; }, kQueuedWait));
  release.set_value();
  ASSERT_OK(other_answer.get());
  ASSERT_OK_AND_ASSIGN(Scores got, scores.get());
  EXPECT_THAT(served.passes(), ElementsAre(1, 3));
  ExpectScores(got, MeanClipScores(video, served.info(), 3));
}

TEST(ScoreVideos, ClipsSentTogetherGoInBatchesOfAtMostMaxBatch) {
  const std::string video = TestVideo();
  ASSERT_FALSE(video.empty());
  Served served(/*max_batch=*/2);
  VideoScoring how;
  how.clips = 3;
  how.stream_clips = false;
  const std::vector<std::string_view> videos = {video, video};
  ASSERT_OK_AND_ASSIGN(Scores scores, ScoreVideos(served.batcher(), served.info(), videos, how));
  EXPECT_THAT(served.passes(), ElementsAre(2, 1, 2, 1));
  std::vector<float> want = MeanClipScores(video, served.info(), 3);
  want.insert(want.end(), want.begin(), want.end());
  ExpectScores(scores, want);
}

TEST(ScoreVideos, ARefusedClipFailsTheVideo) {
  const std::string video = TestVideo();
  ASSERT_FALSE(video.empty());
  Served served(/*max_batch=*/8);
  served.batcher().Shutdown();
  VideoScoring how;
  how.stream_clips = true;
  const std::vector<std::string_view> videos = {video};
  EXPECT_STATUS(ScoreVideos(served.batcher(), served.info(), videos, how),
                StatusCode::kUnavailable);
  how.stream_clips = false;
  EXPECT_STATUS(ScoreVideos(served.batcher(), served.info(), videos, how),
                StatusCode::kUnavailable);
  const std::vector<std::string_view> not_video = {"not a video"};
  EXPECT_STATUS(ScoreVideos(served.batcher(), served.info(), not_video, how),
                StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::serve
