// The front over in-process replicas (a service and an HTTP server each, on loopback): least
// outstanding balancing, failover from a dead replica and its replacement, and a load ramp that
// scales 1 -> 3 -> 1 on an injected clock.
#include "serve/front.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "http/client.h"
#include "http/server.h"
#include "serve/kserve.h"
#include "serve/service.h"
#include "testing/status_matchers.h"
#include "testing/wait.h"

namespace reel::serve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Shared by every replica's model: forward passes wait while it is closed.
struct Gate {
  std::mutex mu;
  std::condition_variable changed;
  bool open = true;
  int calls = 0;
  void Set(bool value) {
    std::lock_guard lock(mu);
    open = value;
    changed.notify_all();
  }
};

class GateModel : public Model {
 public:
  explicit GateModel(Gate* gate) : gate_(gate) {
    info_.name = "m";
    info_.version = "1";
    info_.sample_shape = {2};
    info_.class_names = {"a", "b"};
  }
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    std::unique_lock lock(gate_->mu);
    ++gate_->calls;
    ++calls_;
    gate_->changed.notify_all();
    gate_->changed.wait(lock, [&] { return gate_->open; });
    return std::vector<float>(input, input + 2 * n);
  }
  int calls() const {
    std::lock_guard lock(gate_->mu);
    return calls_;
  }

 private:
  Gate* gate_;
  mutable int calls_ = 0;  // guarded by gate_->mu
};

class InProcessReplica : public Replica {
 public:
  // `stops` counts Stop calls: a stopped replica is soon freed by the front.
  static Result<std::unique_ptr<InProcessReplica>> Start(Gate* gate, int id,
                                                         std::atomic<int>* stops) {
    auto r = std::unique_ptr<InProcessReplica>(new InProcessReplica(id));
    r->stops_ = stops;
    r->model_ = std::make_shared<GateModel>(gate);
    BatcherOptions batching;
    batching.max_batch = 1;
    REEL_RETURN_IF_ERROR(r->service_.AddModel("m", r->model_, batching));
    http::Router router;
    REEL_RETURN_IF_ERROR(r->service_.AddRoutes(&router));
    http::ServerOptions options;
    options.threads = 8;
    REEL_ASSIGN_OR_RETURN(r->server_, http::Server::Start(options, std::move(router)));
    r->url_ = r->server_->url();
    return r;
  }
  const std::string& url() const override { return url_; }
  std::string name() const override { return "in-process " + std::to_string(id_); }
  bool Alive() override { return alive_; }
  void Stop(std::chrono::milliseconds) override {
    if (server_) server_->Shutdown();
    service_.Shutdown();
    ++*stops_;
  }
  // Dies: its port closes at once.
  void Kill() {
    alive_ = false;
    server_.reset();
  }
  int calls() const { return model_->calls(); }

 private:
  explicit InProcessReplica(int id) : id_(id) {}
  int id_;
  Service service_;
  std::shared_ptr<GateModel> model_;
  std::unique_ptr<http::Server> server_;
  std::string url_;
  std::atomic<bool> alive_{true};
  std::atomic<int>* stops_ = nullptr;
};

class FrontTest : public ::testing::Test {
 protected:
  void StartFront(int min, int max) {
    FrontOptions options;
    options.scale.min_replicas = min;
    options.scale.max_replicas = max;
    options.scale.target_in_flight = 2;
    options.scale.scale_down_window = std::chrono::seconds(10);
    auto start = [this]() -> Result<std::unique_ptr<Replica>> {
      REEL_ASSIGN_OR_RETURN(auto replica, InProcessReplica::Start(
                                              &gate_, static_cast<int>(started_.size()), &stops_));
      started_.push_back(replica.get());
      return std::unique_ptr<Replica>(std::move(replica));
    };
    ASSERT_OK_AND_ASSIGN(front_, Front::Start(options, start, &clock_));
    http::Router router;
    ASSERT_OK(front_->AddRoutes(&router));
    http::ServerOptions server_options;
    server_options.threads = 16;
    ASSERT_OK_AND_ASSIGN(server_, http::Server::Start(server_options, std::move(router)));
  }

  void TearDown() override {
    gate_.Set(true);
    server_.reset();
    front_.reset();
  }

  Result<http::Response> Infer() {
    InferRequest request;
    request.inputs.push_back(
        MakeTensor("input", DataType::kFp32, {1, 2}, std::vector<float>{1, 2}));
    const Body body = EncodeInferRequest(request, false);
    REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(server_->url()));
    return client.Post("/v2/models/m/infer", body.bytes);
  }

  bool InFlight(int n) {
    return testing::WaitUntil(
        [&] {
          return front_->MetricsText().find("reel_front_in_flight " + std::to_string(n) + "\n") !=
                 std::string::npos;
        },
        std::chrono::seconds(20));
  }

  Gate gate_;
  FakeClock clock_;
  std::vector<InProcessReplica*> started_;  // owned by the front, freed once stopped
  std::atomic<int> stops_{0};
  std::unique_ptr<Front> front_;
  std::unique_ptr<http::Server> server_;
};

TEST_F(FrontTest, ProxiesTheProtocolAndAnswersHealthItself) {
  StartFront(1, 1);
  ASSERT_OK_AND_ASSIGN(http::Client client, http::Client::Make(server_->url()));
  ASSERT_OK_AND_ASSIGN(nlohmann::json meta, client.JsonCall("GET", "/v2/models/m", nullptr));
  EXPECT_EQ(meta["name"], "m");
  ASSERT_OK_AND_ASSIGN(nlohmann::json server, client.JsonCall("GET", "/v2", nullptr));
  EXPECT_EQ(server["name"], "reel");
  ASSERT_OK_AND_ASSIGN(http::Response ready, client.Get("/v2/health/ready"));
  EXPECT_EQ(ready.status, 200);
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer());
  EXPECT_EQ(answer.status, 200);
  ASSERT_OK_AND_ASSIGN(http::Response missing, client.Get("/v2/models/nope"));
  EXPECT_EQ(missing.status, 404);  // the replica's answer, passed through
  EXPECT_THAT(front_->MetricsText(), HasSubstr("reel_front_requests_total 4\n"));
}

TEST_F(FrontTest, EachRequestGoesToTheLeastBusyReplica) {
  StartFront(2, 2);
  gate_.Set(false);
  auto first = std::async(std::launch::async, [&] { return Infer(); });
  ASSERT_TRUE(InFlight(1));
  auto second = std::async(std::launch::async, [&] { return Infer(); });
  ASSERT_TRUE(InFlight(2));
  gate_.Set(true);
  EXPECT_EQ(first.get()->status, 200);
  EXPECT_EQ(second.get()->status, 200);
  EXPECT_EQ(started_[0]->calls(), 1);
  EXPECT_EQ(started_[1]->calls(), 1);
}

TEST_F(FrontTest, ADeadReplicaFailsOverAndIsReplaced) {
  StartFront(2, 2);
  started_[0]->Kill();
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(http::Response answer, Infer());
    EXPECT_EQ(answer.status, 200) << answer.body;
  }
  EXPECT_EQ(started_[1]->calls(), 4);
  // Only the first request tried the dead one; the rest were not sent there.
  EXPECT_THAT(front_->MetricsText(), HasSubstr("reel_front_failovers_total 1\n"));
  const TickResult tick = front_->Tick();
  EXPECT_EQ(tick.replaced, 1);
  EXPECT_EQ(tick.replicas, 2);
  ASSERT_EQ(started_.size(), 3u);
  EXPECT_THAT(front_->MetricsText(), HasSubstr("reel_front_replica_restarts_total 1\n"));
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer());
  EXPECT_EQ(answer.status, 200);
}

TEST_F(FrontTest, ALoadRampScalesOneToThreeAndBackToOne) {
  StartFront(1, 3);
  EXPECT_EQ(front_->Tick().replicas, 1);    // idle: stays at the minimum
  clock_.Advance(std::chrono::seconds(2));  // the clock stands still while requests run
  gate_.Set(false);
  std::vector<std::future<Result<http::Response>>> burst;
  for (int i = 0; i < 6; ++i)
    burst.push_back(std::async(std::launch::async, [&] { return Infer(); }));
  ASSERT_TRUE(InFlight(6));
  const TickResult up = front_->Tick();  // 6 in flight on 1 replica, target 2: ceil(3) = 3
  EXPECT_DOUBLE_EQ(up.load.in_flight_per_replica, 6);
  EXPECT_EQ(up.desired, 3);
  EXPECT_EQ(up.replicas, 3);
  gate_.Set(true);
  for (auto& answer : burst) EXPECT_EQ(answer.get()->status, 200);
  // Quiet, but inside the stabilisation window: the three stay.
  clock_.Advance(std::chrono::seconds(5));
  EXPECT_EQ(front_->Tick().replicas, 3);
  // Past it: down to one; the two surplus drain, then stop.
  clock_.Advance(std::chrono::seconds(6));
  const TickResult down = front_->Tick();
  EXPECT_EQ(down.desired, 1);
  EXPECT_EQ(down.replicas, 1);
  EXPECT_EQ(front_->Tick().replicas, 1);
  EXPECT_EQ(stops_, 2);
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer());
  EXPECT_EQ(answer.status, 200);
}

}  // namespace
}  // namespace reel::serve
