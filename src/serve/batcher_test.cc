#include "serve/batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "testing/status_matchers.h"
#include "testing/wait.h"

namespace reel::serve {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr auto kWait = milliseconds(20'000);

BatcherOptions Options(int max_batch, microseconds delay, std::vector<int> preferred = {}) {
  BatcherOptions options;
  options.max_batch = max_batch;
  options.max_delay = delay;
  options.preferred_batch_sizes = std::move(preferred);
  return options;
}

TEST(PlanBatch, TakesWhatIsQueuedAtOnceWithoutADelay) {
  const Clock::TimePoint t0{hours(1)};
  EXPECT_EQ(PlanBatch({}, t0, t0, Options(4, microseconds(0))).requests, 0u);
  EXPECT_EQ(PlanBatch({1, 2}, t0, t0, Options(4, microseconds(0))).requests, 2u);
  // The next request would not fit: what fits leaves.
  EXPECT_EQ(PlanBatch({3, 2}, t0, t0, Options(4, microseconds(0))).requests, 1u);
}

TEST(PlanBatch, WaitsForCompanyUntilTheDelayOrAFullBatch) {
  const Clock::TimePoint t0{hours(1)};
  const BatcherOptions options = Options(4, microseconds(500));
  const BatchPlan wait = PlanBatch({1, 1}, t0, t0 + microseconds(100), options);
  EXPECT_EQ(wait.requests, 0u);
  EXPECT_EQ(wait.wait_until, t0 + microseconds(500));
  EXPECT_EQ(PlanBatch({1, 1}, t0, t0 + microseconds(500), options).requests, 2u);
  EXPECT_EQ(PlanBatch({1, 1, 2}, t0, t0, options).requests, 3u);  // 4 samples: full
  EXPECT_EQ(PlanBatch({1, 1, 2, 1}, t0, t0, options).requests, 3u);
}

TEST(PlanBatch, PrefersPreferredSizes) {
  const Clock::TimePoint t0{hours(1)};
  const BatcherOptions options = Options(8, microseconds(500), {2, 4});
  // Before the delay: waits for 4 (the largest preferred size), then takes exactly 4.
  EXPECT_EQ(PlanBatch({1, 1, 1}, t0, t0, options).requests, 0u);
  EXPECT_EQ(PlanBatch({1, 1, 1, 1, 1}, t0, t0, options).requests, 4u);
  // At the delay: the largest preferred front part, else all that fits.
  EXPECT_EQ(PlanBatch({1, 1, 1}, t0, t0 + hours(1), options).requests, 2u);
  EXPECT_EQ(PlanBatch({3}, t0, t0 + hours(1), options).requests, 1u);
}

TEST(BatcherOptions, RejectsBadValues) {
  EXPECT_STATUS(Options(0, microseconds(0)).Validate(), StatusCode::kInvalidArgument);
  EXPECT_STATUS(Options(4, microseconds(-1)).Validate(), StatusCode::kInvalidArgument);
  EXPECT_STATUS(Options(4, microseconds(0), {5}).Validate(), StatusCode::kInvalidArgument);
  BatcherOptions no_instances = Options(4, microseconds(0));
  no_instances.instances = 0;
  EXPECT_STATUS(no_instances.Validate(), StatusCode::kInvalidArgument);
}

// A model that sums each sample's two values into one output, and can be held inside its
// forward pass until the test releases it.
class GatedModel {
 public:
  explicit GatedModel(bool gated) : open_(!gated) {}

  ForwardFn Fn() {
    return [this](int, const float* input, int64_t n) -> Result<std::vector<float>> {
      std::unique_lock lock(mu_);
      calls_.push_back(n);
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
      if (fail_) return DataLossError("the model broke");
      std::vector<float> out(static_cast<size_t>(n) + (wrong_size_ ? 1 : 0));
      for (int64_t i = 0; i < n; ++i) out[i] = input[2 * i] + input[2 * i + 1];
      return out;
    };
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  // Waits until `count` forward passes have begun.
  bool WaitForCalls(size_t count) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kWait, [&] { return calls_.size() >= count; });
  }
  std::vector<int64_t> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  void set_fail() { fail_ = true; }
  void set_wrong_size() { wrong_size_ = true; }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_;
  std::atomic<bool> fail_{false}, wrong_size_{false};
  std::vector<int64_t> calls_;
};

BatchWork Work(float a, float b) {
  BatchWork work;
  work.input = {a, b};
  return work;
}

// The same floats as a request's FP32 bytes, as the server hands them over.
BatchWork BytesWork(float a, float b) {
  BatchWork work;
  const float values[] = {a, b};
  work.input_bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  return work;
}

std::future<Result<BatchResult>> RunAsync(Batcher* batcher, BatchWork work) {
  return std::async(std::launch::async, [batcher, work = std::move(work)]() mutable {
    return batcher->Run(std::move(work));
  });
}

bool WaitForQueued(const Batcher& batcher, int64_t count) {
  return testing::WaitUntil([&] { return batcher.stats().queued == count; }, kWait);
}

TEST(Batcher, FillsABatchAndGivesEachRequestItsOwnAnswer) {
  GatedModel model(/*gated=*/false);
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(4, hours(1)), 2, 1, model.Fn()));
  // Two rounds: the second batch is joined in the buffer the first one left.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<Result<BatchResult>>> answers;
    for (int i = 0; i < 4; ++i) {
      const float a = static_cast<float>(i + round);
      answers.push_back(RunAsync(batcher.get(), i % 2 ? BytesWork(a, 10 * a) : Work(a, 10 * a)));
    }
    for (int i = 0; i < 4; ++i) {
      ASSERT_OK_AND_ASSIGN(BatchResult result, answers[i].get());
      EXPECT_THAT(result.output, ::testing::ElementsAre(11.f * static_cast<float>(i + round)));
      EXPECT_EQ(result.batch_size, 4);
    }
  }
  EXPECT_THAT(model.calls(), ::testing::ElementsAre(4, 4));
  const BatcherStats stats = batcher->stats();
  EXPECT_EQ(stats.succeeded, 8);
  EXPECT_EQ(stats.batches, 2);
  EXPECT_EQ(stats.batch_sizes.at(4), 2);
}

TEST(Batcher, RequestsGatherWhileTheInstanceIsBusy) {
  GatedModel model(/*gated=*/true);
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(8, microseconds(0)), 2, 1, model.Fn()));
  auto first = RunAsync(batcher.get(), Work(1, 1));
  ASSERT_TRUE(model.WaitForCalls(1));
  std::vector<std::future<Result<BatchResult>>> rest;
  for (int i = 0; i < 3; ++i) rest.push_back(RunAsync(batcher.get(), Work(i, 0)));
  ASSERT_TRUE(WaitForQueued(*batcher, 3));
  model.Open();
  ASSERT_OK(first.get());
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(BatchResult result, rest[i].get());
    EXPECT_THAT(result.output, ::testing::ElementsAre(static_cast<float>(i)));
  }
  EXPECT_THAT(model.calls(), ::testing::ElementsAre(1, 3));
}

TEST(Batcher, SubmitReturnsBeforeTheAnswer) {
  GatedModel model(/*gated=*/true);
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(4, microseconds(0)), 2, 1, model.Fn()));
  std::future<Result<BatchResult>> answer = batcher->Submit(Work(1, 2));
  ASSERT_TRUE(model.WaitForCalls(1));
  EXPECT_EQ(answer.wait_for(milliseconds(0)), std::future_status::timeout);
  model.Open();
  ASSERT_OK_AND_ASSIGN(BatchResult result, answer.get());
  EXPECT_THAT(result.output, ::testing::ElementsAre(3.f));
  // Refusals come back ready.
  BatchWork too_big;
  too_big.input.assign(10 * 2, 0.f);
  too_big.n = 10;
  EXPECT_STATUS(batcher->Submit(std::move(too_big)).get(), StatusCode::kInvalidArgument);
  batcher->Shutdown();
  std::future<Result<BatchResult>> late = batcher->Submit(Work(1, 1));
  ASSERT_EQ(late.wait_for(milliseconds(0)), std::future_status::ready);
  EXPECT_STATUS(late.get(), StatusCode::kUnavailable);
}

TEST(Batcher, AFullQueueAnswersAtOnce) {
  GatedModel model(/*gated=*/true);
  BatcherOptions options = Options(1, microseconds(0));
  options.max_queue = 2;
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(options, 2, 1, model.Fn()));
  auto first = RunAsync(batcher.get(), Work(1, 1));
  ASSERT_TRUE(model.WaitForCalls(1));
  auto second = RunAsync(batcher.get(), Work(2, 2));
  auto third = RunAsync(batcher.get(), Work(3, 3));
  ASSERT_TRUE(WaitForQueued(*batcher, 2));
  EXPECT_STATUS(batcher->Run(Work(4, 4)), StatusCode::kResourceExhausted);
  model.Open();
  EXPECT_OK(first.get());
  EXPECT_OK(second.get());
  EXPECT_OK(third.get());
  EXPECT_EQ(batcher->stats().rejected, 1);
}

TEST(Batcher, LateAndAbandonedRequestsAreNotComputed) {
  FakeClock clock;
  GatedModel model(/*gated=*/true);
  ASSERT_OK_AND_ASSIGN(auto batcher,
                       Batcher::Start(Options(1, microseconds(0)), 2, 1, model.Fn(), &clock));
  auto first = RunAsync(batcher.get(), Work(1, 1));
  ASSERT_TRUE(model.WaitForCalls(1));
  BatchWork late = Work(2, 2);
  late.deadline = clock.Now() + milliseconds(1);
  auto late_answer = RunAsync(batcher.get(), std::move(late));
  BatchWork gone = Work(3, 3);
  gone.cancelled = [] { return true; };
  auto gone_answer = RunAsync(batcher.get(), std::move(gone));
  auto kept = RunAsync(batcher.get(), Work(4, 4));
  ASSERT_TRUE(WaitForQueued(*batcher, 3));
  clock.Advance(milliseconds(2));
  model.Open();
  EXPECT_OK(first.get());
  EXPECT_STATUS(late_answer.get(), StatusCode::kDeadlineExceeded);
  EXPECT_STATUS(gone_answer.get(), StatusCode::kCancelled);
  ASSERT_OK_AND_ASSIGN(BatchResult result, kept.get());
  EXPECT_THAT(result.output, ::testing::ElementsAre(8.f));
  EXPECT_THAT(model.calls(), ::testing::ElementsAre(1, 1));
  const BatcherStats stats = batcher->stats();
  EXPECT_EQ(stats.expired, 1);
  EXPECT_EQ(stats.cancelled, 1);
  EXPECT_EQ(stats.succeeded, 2);
}

TEST(Batcher, TheDelayIsMeasuredOnTheInjectedClock) {
  FakeClock clock;
  GatedModel model(/*gated=*/false);
  ASSERT_OK_AND_ASSIGN(auto batcher,
                       Batcher::Start(Options(8, hours(1), {2, 4}), 2, 1, model.Fn(), &clock));
  std::vector<std::future<Result<BatchResult>>> answers;
  for (int i = 0; i < 3; ++i) answers.push_back(RunAsync(batcher.get(), Work(i, i)));
  ASSERT_TRUE(WaitForQueued(*batcher, 3));
  EXPECT_TRUE(model.calls().empty());  // an hour of fake time has not passed
  clock.Advance(hours(1));
  batcher->Poke();
  for (auto& answer : answers) EXPECT_OK(answer.get());
  // Three of the wanted four: the largest preferred part (2), then the rest.
  EXPECT_THAT(model.calls(), ::testing::ElementsAre(2, 1));
}

TEST(Batcher, AModelErrorAnswersEveryRequestOfItsBatch) {
  GatedModel model(/*gated=*/false);
  model.set_fail();
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(2, hours(1)), 2, 1, model.Fn()));
  auto a = RunAsync(batcher.get(), Work(1, 1));
  auto b = RunAsync(batcher.get(), Work(2, 2));
  EXPECT_STATUS(a.get(), StatusCode::kDataLoss);
  EXPECT_STATUS(b.get(), StatusCode::kDataLoss);
  EXPECT_EQ(batcher->stats().failed, 2);
}

TEST(Batcher, AWrongOutputSizeIsAnInternalError) {
  GatedModel model(/*gated=*/false);
  model.set_wrong_size();
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(1, microseconds(0)), 2, 1, model.Fn()));
  EXPECT_STATUS(batcher->Run(Work(1, 1)), StatusCode::kInternal);
}

TEST(Batcher, RefusesMalformedWork) {
  GatedModel model(/*gated=*/false);
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(2, microseconds(0)), 2, 1, model.Fn()));
  BatchWork too_big;
  too_big.n = 3;
  too_big.input.resize(6);
  EXPECT_STATUS(batcher->Run(std::move(too_big)), StatusCode::kInvalidArgument);
  BatchWork short_input;
  short_input.input = {1};
  EXPECT_STATUS(batcher->Run(std::move(short_input)), StatusCode::kInvalidArgument);
  BatchWork short_bytes;
  short_bytes.input_bytes = std::string(7, '\0');  // one float and three bytes
  EXPECT_STATUS(batcher->Run(std::move(short_bytes)), StatusCode::kInvalidArgument);
  BatchWork ragged_bytes;
  ragged_bytes.input_bytes = std::string(9, '\0');  // two floats and a byte
  EXPECT_STATUS(batcher->Run(std::move(ragged_bytes)), StatusCode::kInvalidArgument);
  EXPECT_TRUE(model.calls().empty());
}

TEST(Batcher, ShutdownFinishesQueuedWorkThenRefuses) {
  GatedModel model(/*gated=*/true);
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(Options(1, hours(1)), 2, 1, model.Fn()));
  auto first = RunAsync(batcher.get(), Work(1, 1));
  ASSERT_TRUE(model.WaitForCalls(1));
  auto queued = RunAsync(batcher.get(), Work(2, 2));
  ASSERT_TRUE(WaitForQueued(*batcher, 1));
  std::thread stopper([&] { batcher->Shutdown(); });
  model.Open();
  stopper.join();
  EXPECT_OK(first.get());
  ASSERT_OK_AND_ASSIGN(BatchResult result, queued.get());
  EXPECT_THAT(result.output, ::testing::ElementsAre(4.f));
  EXPECT_STATUS(batcher->Run(Work(3, 3)), StatusCode::kUnavailable);
}

TEST(Batcher, InstancesRunForwardPassesAtOnce) {
  GatedModel model(/*gated=*/true);
  BatcherOptions options = Options(1, microseconds(0));
  options.instances = 3;
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Start(options, 2, 1, model.Fn()));
  std::vector<std::future<Result<BatchResult>>> answers;
  for (int i = 0; i < 3; ++i) answers.push_back(RunAsync(batcher.get(), Work(i, 1)));
  EXPECT_TRUE(model.WaitForCalls(3));  // all three inside forward together
  model.Open();
  for (auto& answer : answers) EXPECT_OK(answer.get());
}

}  // namespace
}  // namespace reel::serve
