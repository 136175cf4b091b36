// Parameter servers on loopback: a BSP round applies the workers' mean gradient once; SSP applies
// each gradient at once and holds a worker back at the staleness bound; pushes are idempotent; a
// server restarted from its snapshot asks for the gradient it lost and the round completes with
// the same values; bad requests are refused with their reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <thread>

#include "http/client.h"
#include "parallel/ps_client.h"
#include "parallel/ps_server.h"
#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

using ::testing::HasSubstr;

constexpr double kLr = 0.5;

// One shard of one parameter (and one buffer), updated by plain SGD, snapshotted in memory.
struct ShardFixture {
  at::Tensor param = torch::tensor({1.0F, 2.0F, 3.0F}).set_requires_grad(true);
  at::Tensor buffer = torch::zeros({2});
  std::mutex mu;
  PsShardState saved;  // the last snapshot
  at::Tensor saved_param, saved_buffer;
  int updates = 0;
  std::unique_ptr<ParameterServer> server;

  Status Start(PsSync sync, int staleness, PsShardState initial,
               std::chrono::milliseconds wait = std::chrono::milliseconds(100)) {
    ParameterServerOptions o;
    o.workers = 2;
    o.sync = sync;
    o.staleness = staleness;
    o.max_wait = wait;
    auto update = [this](int64_t) {
      torch::NoGradGuard no_grad;
      param.sub_(param.grad() * kLr);
      ++updates;
      return Status::Ok();
    };
    auto snapshot = [this](const PsShardState& s) {
      std::lock_guard<std::mutex> lock(mu);
      saved = s;
      saved_param = param.detach().clone();
      saved_buffer = buffer.clone();
      return Status::Ok();
    };
    REEL_ASSIGN_OR_RETURN(
        server, ParameterServer::Start(o, {param}, {buffer}, std::move(initial), update, snapshot));
    return Status::Ok();
  }
  std::string address() {
    std::lock_guard<std::mutex> lock(mu);
    return server ? server->address() : "127.0.0.1:1";
  }
};

// A worker's copy of the shard, with the gradient it will push.
struct WorkerFixture {
  at::Tensor param = torch::zeros({3}).set_requires_grad(true);
  at::Tensor buffer = torch::zeros({2});
  std::unique_ptr<PsClient> client;

  WorkerFixture(int worker, ShardFixture* shard, int timeout_ms = 2000) {
    PsClientOptions o;
    o.worker = worker;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    auto made = PsClient::Make(o, {PsShardTensors{{param}, {buffer}}},
                               [shard](int) -> Result<std::string> { return shard->address(); });
    EXPECT_OK(made.status());
    if (made.ok()) client = std::move(*made);
  }
  Status PushGrad(int64_t step, std::vector<float> grad, std::vector<float> buf = {0, 0}) {
    param.mutable_grad() = torch::tensor(grad);
    buffer.copy_(torch::tensor(buf));
    return client->Push(step, true);
  }
};

std::vector<float> Values(const at::Tensor& t) {
  at::Tensor c = t.detach().contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

TEST(ParameterServerTest, BspAppliesTheMeanOnceEveryWorkerPushed) {
  ShardFixture shard;
  ASSERT_OK(shard.Start(PsSync::kBsp, 0, PsShardState::Fresh(2)));
  WorkerFixture w0(0, &shard, 300), w1(1, &shard, 300);
  ASSERT_OK(w0.client->Pull(0));
  EXPECT_EQ(Values(w0.param), (std::vector<float>{1, 2, 3}));
  ASSERT_OK(w0.PushGrad(0, {2, 0, -2}, {4, 8}));
  // Step 1 needs worker 1's gradient: the pull waits, then gives up at the client's timeout.
  EXPECT_STATUS(w0.client->Pull(1), StatusCode::kUnavailable);
  EXPECT_EQ(shard.updates, 0);
  ASSERT_OK(w1.PushGrad(0, {0, 2, 2}, {2, 0}));
  ASSERT_OK(w0.client->Pull(1));
  // 1 - 0.5 * (2 + 0) / 2, 2 - 0.5 * (0 + 2) / 2, 3 - 0.5 * (-2 + 2) / 2; buffers averaged.
  EXPECT_EQ(Values(w0.param), (std::vector<float>{0.5F, 1.5F, 3}));
  EXPECT_EQ(Values(w0.buffer), (std::vector<float>{3, 4}));
  EXPECT_EQ(shard.updates, 1);
  EXPECT_EQ(shard.saved.version, 1);
  EXPECT_EQ(shard.saved.pushed, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(w0.client->stats().bytes_sent, 5 * sizeof(float));
}

TEST(ParameterServerTest, PushesAreIdempotent) {
  ShardFixture shard;
  ASSERT_OK(shard.Start(PsSync::kBsp, 0, PsShardState::Fresh(2)));
  WorkerFixture w0(0, &shard), w1(1, &shard);
  ASSERT_OK(w0.PushGrad(0, {2, 2, 2}));
  ASSERT_OK(w0.PushGrad(0, {100, 100, 100}));  // a retry after a lost answer: ignored
  ASSERT_OK(w1.PushGrad(0, {2, 2, 2}));
  ASSERT_OK(w1.client->Pull(1));
  EXPECT_EQ(Values(w1.param), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(shard.server->stats().duplicates, 1);
  ASSERT_OK_AND_ASSIGN(int64_t resume, w0.client->ResumeStep());
  EXPECT_EQ(resume, 1);
}

TEST(ParameterServerTest, SspAppliesEachGradientAndBoundsStaleness) {
  ShardFixture shard;
  ASSERT_OK(shard.Start(PsSync::kSsp, 1, PsShardState::Fresh(2)));
  WorkerFixture w0(0, &shard, 300), w1(1, &shard, 300);
  ASSERT_OK(w0.PushGrad(0, {2, 2, 2}));
  ASSERT_OK(w0.client->Pull(1));  // one step ahead of worker 1: within the bound
  EXPECT_EQ(Values(w0.param), (std::vector<float>{0.5F, 1.5F, 2.5F}));
  ASSERT_OK(w0.PushGrad(1, {2, 2, 2}));
  EXPECT_STATUS(w0.client->Pull(2), StatusCode::kUnavailable);  // two ahead: held back
  ASSERT_OK(w1.PushGrad(0, {-4, 0, 0}));
  ASSERT_OK(w0.client->Pull(2));
  EXPECT_EQ(Values(w0.param), (std::vector<float>{1, 1, 2}));
  EXPECT_EQ(shard.updates, 3);
  EXPECT_EQ(w0.client->stats().max_staleness, 1);
}

TEST(ParameterServerTest, RestartedServerAsksForTheGradientItLost) {
  ShardFixture shard;
  ASSERT_OK(shard.Start(PsSync::kBsp, 0, PsShardState::Fresh(2)));
  WorkerFixture w0(0, &shard), w1(1, &shard);
  ASSERT_OK(w0.PushGrad(0, {2, 0, 0}));  // the round is not complete: nothing snapshotted
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    shard.server.reset();  // "killed": what it summed is gone
  }
  EXPECT_EQ(shard.saved.version, 0);
  // Restarted from its snapshot (never written: a fresh shard), on another port.
  ASSERT_OK(shard.Start(PsSync::kBsp, 0, PsShardState::Fresh(2)));
  ASSERT_OK(w1.PushGrad(0, {0, 2, 0}));
  ASSERT_OK(w0.client->Pull(1));  // asked to resend step 0's gradient, then answered
  EXPECT_EQ(Values(w0.param), (std::vector<float>{0.5F, 1.5F, 3}));
  EXPECT_EQ(w0.client->stats().resends, 1);
  EXPECT_GE(w0.client->stats().retries, 1);  // the dead address was tried, then looked up again
}

TEST(ParameterServerTest, RefusesBadRequests) {
  ShardFixture shard;
  ASSERT_OK(shard.Start(PsSync::kBsp, 0, PsShardState::Fresh(2)));
  ASSERT_OK_AND_ASSIGN(http::Client raw, http::Client::Make("http://" + shard.address()));
  ASSERT_OK_AND_ASSIGN(http::Response short_body,
                       raw.Post("/ps/v1/push?worker=0&step=0", "abc", "application/octet-stream"));
  EXPECT_EQ(short_body.status, 400);
  EXPECT_THAT(short_body.body, HasSubstr("a push of 3 bytes, expected 20"));
  ASSERT_OK_AND_ASSIGN(http::Response bad_worker, raw.Get("/ps/v1/pull?worker=2&step=0"));
  EXPECT_EQ(bad_worker.status, 400);
  EXPECT_THAT(bad_worker.body, HasSubstr("'worker' must be 0..1"));
  ASSERT_OK_AND_ASSIGN(
      http::Response ahead,
      raw.Post("/ps/v1/push?worker=0&step=3", std::string(20, '\0'), "application/octet-stream"));
  EXPECT_EQ(ahead.status, 409);
  EXPECT_THAT(ahead.body, HasSubstr("expects its step 0"));
  EXPECT_EQ(shard.updates, 0);
  EXPECT_STATUS(
      ParameterServer::Start(
          {}, {torch::zeros({2, 3}).t()}, {}, PsShardState::Fresh(1),
          [](int64_t) { return Status::Ok(); }, [](const PsShardState&) { return Status::Ok(); }),
      StatusCode::kInvalidArgument);
  EXPECT_STATUS(ParameterServer::Start(
                    {}, {}, {}, PsShardState::Fresh(3), [](int64_t) { return Status::Ok(); },
                    [](const PsShardState&) { return Status::Ok(); }),
                StatusCode::kInvalidArgument);
}

TEST(ParameterServerTest, WaitReturnsWhenEveryWorkerIsDone) {
  ShardFixture shard;
  ASSERT_OK(shard.Start(PsSync::kBsp, 0, PsShardState::Fresh(2)));
  WorkerFixture w0(0, &shard), w1(1, &shard);
  ASSERT_OK(w0.client->Done());
  int polls = 0;
  EXPECT_STATUS(shard.server->Wait([&] { return ++polls > 2; }, std::chrono::milliseconds(1)),
                StatusCode::kCancelled);
  ASSERT_OK(w1.client->Done());
  EXPECT_OK(shard.server->Wait(nullptr));
  EXPECT_EQ(shard.saved.done, (std::vector<bool>{true, true}));
}

TEST(PsStateTest, RoundTripsAndRefusesOtherJobs) {
  PsShardState s = PsShardState::Fresh(2);
  s.version = 7;
  s.pushed = {7, 6};
  s.done = {false, true};
  ASSERT_OK_AND_ASSIGN(PsShardState back, PsShardState::FromJson(s.ToJson(), 2, "snap"));
  EXPECT_EQ(back.version, 7);
  EXPECT_EQ(back.pushed, s.pushed);
  EXPECT_EQ(back.done, s.done);
  EXPECT_STATUS(PsShardState::FromJson(s.ToJson(), 3, "snap"), StatusCode::kDataLoss);
  EXPECT_STATUS(PsShardState::FromJson("{", 2, "snap"), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace reel::parallel
