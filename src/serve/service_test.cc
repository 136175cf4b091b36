// The KServe v2 routes over real HTTP (Reel's server and client on loopback) in front of a
// small in-memory model; model_torch_test.cc loads real LibTorch models.
#include "serve/service.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>

#include "base/files.h"
#include "base/unique_fd.h"
#include "http/client.h"
#include "http/server.h"
#include "serve/kserve.h"
#include "serve/sum_model_testing.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait.h"

namespace reel::serve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// The sum model, which can be held inside its forward pass.
class FakeModel : public SumModel {
 public:
  explicit FakeModel(std::string version = "1") : SumModel("fake", std::move(version)) {}
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    {
      std::unique_lock lock(mu_);
      ++calls_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
    }
    return SumModel::Forward(input, n);
  }
  void set_open(bool open) {
    std::lock_guard lock(mu_);
    open_ = open;
    changed_.notify_all();
  }
  bool WaitForCalls(int count, std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return calls_ >= count; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  mutable int calls_ = 0;
  bool open_ = true;
};

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(BatcherOptions{}); }

  void Start(BatcherOptions batching, ServiceOptions options = {}) {
    server_.reset();
    service_ = std::make_unique<Service>(options);
    model_ = std::make_shared<FakeModel>();
    ASSERT_OK(service_->AddModel("", model_, batching));
    http::Router router;
    ASSERT_OK(service_->AddRoutes(&router));
    http::ServerOptions options;
    options.threads = 8;
    ASSERT_OK_AND_ASSIGN(server_, http::Server::Start(options, std::move(router)));
    ASSERT_OK_AND_ASSIGN(client_, http::Client::Make(server_->url()));
  }

  void TearDown() override {
    if (model_) model_->set_open(true);
    server_.reset();
  }

  // POSTs `request` to the fake model's infer route, binary or JSON.
  Result<http::Response> Infer(const InferRequest& request, bool binary,
                               const std::string& target = "/v2/models/fake/infer") {
    // A client of its own: tests call this from several threads at once.
    const Body body = EncodeInferRequest(request, binary);
    http::ClientOptions options;
    if (body.json_length) {
      options.headers["Inference-Header-Content-Length"] = std::to_string(*body.json_length);
    }
    REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(server_->url(), options));
    return client.Post(target, body.bytes);
  }

  // Waits until /metrics holds `line` (a sample line, value included).
  bool MetricShows(const std::string& line) {
    return testing::WaitUntil(
        [&] { return service_->MetricsText().find(line) != std::string::npos; },
        std::chrono::seconds(20));
  }

  static InferRequest Ones(int64_t batch, float value = 1.f) {
    InferRequest request;
    request.id = "r1";
    request.inputs.push_back(MakeTensor("input", DataType::kFp32, {batch, 3, 1, 2, 2},
                                        std::vector<float>(batch * 12, value)));
    return request;
  }

  std::unique_ptr<Service> service_;
  std::shared_ptr<FakeModel> model_;
  std::unique_ptr<http::Server> server_;
  std::optional<http::Client> client_;
};

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

TEST_F(ServiceTest, HealthAndMetadata) {
  ASSERT_OK_AND_ASSIGN(http::Response live, client_->Get("/v2/health/live"));
  EXPECT_EQ(live.status, 200);
  ASSERT_OK_AND_ASSIGN(http::Response ready, client_->Get("/v2/health/ready"));
  EXPECT_EQ(ready.status, 200);
  ASSERT_OK_AND_ASSIGN(nlohmann::json server, client_->JsonCall("GET", "/v2", nullptr));
  EXPECT_EQ(server["name"], "reel");
  ASSERT_OK_AND_ASSIGN(nlohmann::json model, client_->JsonCall("GET", "/v2/models/fake", nullptr));
  EXPECT_EQ(model["name"], "fake");
  EXPECT_EQ(model["versions"], nlohmann::json::array({"1"}));
  EXPECT_EQ(model["inputs"][0]["shape"], nlohmann::json::array({-1, 3, 1, 2, 2}));
  EXPECT_EQ(model["outputs"][0]["shape"], nlohmann::json::array({-1, 3}));
  ASSERT_OK_AND_ASSIGN(http::Response version_ready,
                       client_->Get("/v2/models/fake/versions/1/ready"));
  EXPECT_EQ(version_ready.status, 200);
}

TEST_F(ServiceTest, InfersWithJsonAndBinaryTensors) {
  for (bool binary : {false, true}) {
    InferRequest request = Ones(2);
    request.binary_output = binary;
    ASSERT_OK_AND_ASSIGN(http::Response answer, Infer(request, binary));
    ASSERT_EQ(answer.status, 200) << answer.body;
    auto json_length =
        JsonLengthHeader(answer.Header("Inference-Header-Content-Length"), answer.body.size());
    ASSERT_OK(json_length);
    EXPECT_EQ(json_length->has_value(), binary);
    ASSERT_OK_AND_ASSIGN(InferResponse response, ParseInferResponse(answer.body, *json_length));
    EXPECT_EQ(response.model_name, "fake");
    EXPECT_EQ(response.model_version, "1");
    EXPECT_EQ(response.id, "r1");
    ASSERT_EQ(response.outputs.size(), 2u);
    EXPECT_EQ(response.outputs[0].name, "logits");
    EXPECT_EQ(response.outputs[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_THAT(Floats(response.outputs[0]), ElementsAre(12, -12, 0, 12, -12, 0));
    const std::vector<float> p = Floats(response.outputs[1]);
    EXPECT_NEAR(p[0], 1.0, 1e-5);
    EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-6);
  }
}

TEST_F(ServiceTest, ClassificationExtensionNamesTheClasses) {
  InferRequest request = Ones(1, -1.f);
  request.inputs[0].shape = {3, 1, 2, 2};  // no batch dimension: one sample
  request.outputs.push_back({"probabilities", false, 2});
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer(request, false));
  ASSERT_EQ(answer.status, 200) << answer.body;
  ASSERT_OK_AND_ASSIGN(InferResponse response, ParseInferResponse(answer.body, std::nullopt));
  ASSERT_EQ(response.outputs.size(), 1u);
  EXPECT_EQ(response.outputs[0].shape, (std::vector<int64_t>{1, 2}));
  ASSERT_OK_AND_ASSIGN(auto labels, response.outputs[0].Strings());
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_THAT(std::string(labels[0]), HasSubstr(":1:down"));
  EXPECT_THAT(std::string(labels[1]), HasSubstr(":2:flat"));
}

TEST_F(ServiceTest, Uint8PixelsAreNormalisedAsInEvaluation) {
  InferRequest request;
  request.inputs.push_back(
      MakeTensor("input", DataType::kUint8, {1, 3, 1, 2, 2}, std::vector<uint8_t>(12, 255)));
  request.outputs.push_back({"logits", false, std::nullopt});
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer(request, true));
  ASSERT_EQ(answer.status, 200) << answer.body;
  ASSERT_OK_AND_ASSIGN(InferResponse response, ParseInferResponse(answer.body, std::nullopt));
  // (1 - mean_c) / std_c summed over 4 pixels of each channel.
  const double want =
      4 * ((1 - 0.43216) / 0.22803 + (1 - 0.394666) / 0.22145 + (1 - 0.37645) / 0.216989);
  EXPECT_NEAR(Floats(response.outputs[0])[0], want, 1e-3);
}

TEST_F(ServiceTest, BadRequestsAreAnsweredWithTheirProblem) {
  struct Case {
    std::string target, body;
    int status;
    std::string message;
  };
  const std::string good_input =
      R"({"name":"input","datatype":"FP32","shape":[1,3,1,2,2],"data":[1,1,1,1,1,1,1,1,1,1,1,1]})";
  std::string zeros24 = "0";
  for (int i = 1; i < 24; ++i) zeros24 += ",0";
  const std::vector<Case> cases = {
      {"/v2/models/nope/infer", R"({"inputs":[]})", 404, "no model named 'nope'"},
      {"/v2/models/fake/versions/9/infer", "{}", 404, "has no version '9'"},
      {"/v2/models/fake/infer", "{", 400, "malformed"},
      {"/v2/models/fake/infer",
       R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,3,2,2,2],"data":[)" + zeros24 +
           "]}]}",
       400, "has shape [1,3,2,2,2]"},
      {"/v2/models/fake/infer",
       R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,3,1,2],"data":[1,1,1,1,1,1]}]})",
       400, "takes [B,3,1,2,2]"},
      {"/v2/models/fake/infer",
       R"({"inputs":[{"name":"input","datatype":"INT32","shape":[1,3,1,2,2],"data":[1,1,1,1,1,1,1,1,1,1,1,1]}]})",
       400, "FP32 or UINT8"},
      {"/v2/models/fake/infer",
       R"({"inputs":[{"name":"clip","datatype":"FP32","shape":[1],"data":[1]}]})", 400,
       "takes one input, 'input' or 'uri'"},
      {"/v2/models/fake/infer",
       R"({"inputs":[)" + good_input + R"(],"outputs":[{"name":"embedding"}]})", 400,
       "no output 'embedding'"},
      {"/v2/models/fake/infer",
       R"({"inputs":[{"name":"input","datatype":"FP32","shape":[9,3,1,2,2],"data":[]}]})", 400,
       "elements"},
  };
  for (const Case& c : cases) {
    ASSERT_OK_AND_ASSIGN(http::Response answer, client_->Post(c.target, c.body));
    EXPECT_EQ(answer.status, c.status) << c.target << " " << c.body << " -> " << answer.body;
    EXPECT_THAT(answer.body, HasSubstr(c.message)) << c.body;
  }
  ASSERT_OK_AND_ASSIGN(http::Response metrics, client_->Get("/metrics"));
  EXPECT_THAT(metrics.body,
              HasSubstr("nv_inference_request_failure{model=\"fake\",version=\"1\"} 7"));
}

TEST_F(ServiceTest, AFullQueueIs503WithRetryAfter) {
  BatcherOptions batching;
  batching.max_batch = 1;
  batching.max_queue = 1;
  Start(batching);
  model_->set_open(false);
  auto first = std::async(std::launch::async, [&] { return Infer(Ones(1), false); });
  ASSERT_TRUE(model_->WaitForCalls(1));
  auto second = std::async(std::launch::async, [&] { return Infer(Ones(1), false); });
  ASSERT_TRUE(MetricShows("nv_inference_pending_request_count{model=\"fake\",version=\"1\"} 1"));
  ASSERT_OK_AND_ASSIGN(http::Response third, Infer(Ones(1), false));
  EXPECT_EQ(third.status, 503);
  EXPECT_EQ(third.Header("Retry-After"), "1");
  model_->set_open(true);
  ASSERT_OK_AND_ASSIGN(http::Response a, first.get());
  ASSERT_OK_AND_ASSIGN(http::Response b, second.get());
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(b.status, 200);
}

TEST_F(ServiceTest, ARequestWhoseClientLeftIsDroppedBeforeCompute) {
  BatcherOptions batching;
  batching.max_batch = 1;
  Start(batching);
  model_->set_open(false);
  auto first = std::async(std::launch::async, [&] { return Infer(Ones(1), false); });
  ASSERT_TRUE(model_->WaitForCalls(1));
  {
    // Queued behind the first, from a raw socket that is closed while the request waits.
    const Body body = EncodeInferRequest(Ones(1), false);
    const std::string request =
        "POST /v2/models/fake/infer HTTP/1.1\r\nHost: x\r\n"
        "Content-Length: " +
        std::to_string(body.bytes.size()) + "\r\n\r\n" + body.bytes;
    UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server_->port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(send(fd.get(), request.data(), request.size(), 0),
              static_cast<ssize_t>(request.size()));
    ASSERT_TRUE(MetricShows("nv_inference_pending_request_count{model=\"fake\",version=\"1\"} 1"));
  }  // closed
  model_->set_open(true);
  ASSERT_OK_AND_ASSIGN(http::Response a, first.get());
  EXPECT_EQ(a.status, 200);
  ASSERT_TRUE(MetricShows("reel_inference_request_cancelled{model=\"fake\",version=\"1\"} 1"));
  EXPECT_TRUE(model_->WaitForCalls(1));
  ASSERT_OK_AND_ASSIGN(http::Response after, Infer(Ones(1), false));
  EXPECT_EQ(after.status, 200);
  EXPECT_TRUE(model_->WaitForCalls(2));  // the dropped request never reached the model
  EXPECT_FALSE(model_->WaitForCalls(3, std::chrono::milliseconds(0)));
}

TEST_F(ServiceTest, MetricsCountRequestsAndBatches) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(http::Response answer, Infer(Ones(2), false));
    ASSERT_EQ(answer.status, 200);
  }
  ASSERT_OK_AND_ASSIGN(http::Response metrics, client_->Get("/metrics"));
  EXPECT_EQ(metrics.status, 200);
  const std::string labels = "{model=\"fake\",version=\"1\"}";
  EXPECT_THAT(metrics.body, HasSubstr("nv_inference_request_success" + labels + " 3\n"));
  EXPECT_THAT(metrics.body, HasSubstr("nv_inference_count" + labels + " 6\n"));
  EXPECT_THAT(metrics.body, HasSubstr("nv_inference_exec_count" + labels + " 3\n"));
  EXPECT_THAT(
      metrics.body,
      HasSubstr("reel_inference_batch_size_bucket{model=\"fake\",version=\"1\",le=\"2\"} 3\n"));
  EXPECT_THAT(metrics.body, HasSubstr("# TYPE nv_inference_compute_infer_duration_us counter"));
  // Every request lands in the latency histogram: its +Inf bucket and count are the 3 answered.
  EXPECT_THAT(metrics.body,
              HasSubstr("reel_inference_request_duration_us_bucket{model=\"fake\",version=\"1\","
                        "le=\"+Inf\"} 3\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("reel_inference_request_duration_us_count" + labels + " 3\n"));
}

std::string UriRequest(const std::string& uri) {
  return R"({"inputs":[{"name":"uri","datatype":"BYTES","shape":[1],"data":[")" + uri + R"("]}]})";
}

TEST_F(ServiceTest, TheUriInputReadsOnlyUnderAllowedPrefixes) {
  const std::string videos = reel::testing::SourcePath("testdata/videos");
  ASSERT_OK_AND_ASSIGN(
      http::Response off,
      client_->Post("/v2/models/fake/infer", UriRequest(videos + "/mmaction2_test.mp4")));
  EXPECT_EQ(off.status, 403) << off.body;
  EXPECT_THAT(off.body, HasSubstr("--allow-uri-prefix"));
  ServiceOptions options;
  options.allowed_uri_prefixes = {videos};
  Start(BatcherOptions{}, options);
  ASSERT_OK_AND_ASSIGN(
      http::Response ok,
      client_->Post("/v2/models/fake/infer", UriRequest(videos + "/mmaction2_test.mp4")));
  ASSERT_EQ(ok.status, 200) << ok.body;
  ASSERT_OK_AND_ASSIGN(InferResponse response, ParseInferResponse(ok.body, std::nullopt));
  EXPECT_EQ(response.outputs[0].shape, (std::vector<int64_t>{1, 3}));
  for (const std::string& outside : {videos + "/../README.md", std::string("/etc/hostname")}) {
    ASSERT_OK_AND_ASSIGN(http::Response refused,
                         client_->Post("/v2/models/fake/infer", UriRequest(outside)));
    EXPECT_EQ(refused.status, 403) << outside << " -> " << refused.body;
  }
}

TEST_F(ServiceTest, ATimelineScoresEachClipOfAVideo) {
  const std::string path = reel::testing::SourcePath("testdata/videos/mmaction2_test.mp4");
  ASSERT_OK_AND_ASSIGN(std::string video, ReadFileToString(path));
  InferRequest request;
  request.id = "long";
  request.inputs.push_back(MakeBytesTensor("input", {video}));
  request.clips = 3;
  request.timeline = true;
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer(request, true));
  ASSERT_EQ(answer.status, 200) << answer.body;
  ASSERT_OK_AND_ASSIGN(InferResponse response, ParseInferResponse(answer.body, std::nullopt));
  ASSERT_EQ(response.outputs.size(), 3u);  // logits, probabilities, timeline
  const Tensor& timeline = response.outputs[2];
  EXPECT_EQ(timeline.name, "timeline");
  EXPECT_EQ(timeline.shape, (std::vector<int64_t>{1}));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string_view> videos, timeline.Strings());
  const nlohmann::json clips = nlohmann::json::parse(videos.at(0));
  ASSERT_EQ(clips.size(), 3u);
  double previous_start = -1;
  const std::vector<float> logits = Floats(response.outputs[0]);
  for (const nlohmann::json& clip : clips) {
    EXPECT_GT(clip["start_s"].get<double>(), previous_start);  // in order, spread out
    EXPECT_GT(clip["end_s"].get<double>(), clip["start_s"].get<double>());
    previous_start = clip["start_s"].get<double>();
    EXPECT_EQ(clip["label"], model_->info().class_names.at(clip["index"].get<size_t>()));
    EXPECT_GT(clip["score"].get<double>(), 0.3);  // the best of three classes
  }
  // A tensor input has no clips to lay out.
  InferRequest pixels = Ones(1);
  pixels.timeline = true;
  ASSERT_OK_AND_ASSIGN(http::Response refused, Infer(pixels, false));
  EXPECT_EQ(refused.status, 400);
  EXPECT_THAT(refused.body, HasSubstr("a timeline needs a video input"));
}

TEST_F(ServiceTest, ShutdownTurnsReadinessOff) {
  service_->Shutdown();
  ASSERT_OK_AND_ASSIGN(http::Response ready, client_->Get("/v2/health/ready"));
  EXPECT_EQ(ready.status, 503);
  ASSERT_OK_AND_ASSIGN(http::Response answer, Infer(Ones(1), false));
  EXPECT_EQ(answer.status, 503);
}

// The version that answered `response` (a 200 with a JSON body).
std::string VersionOf(const Result<http::Response>& answer) {
  if (!answer.ok() || answer->status != 200) return "failed";
  Result<InferResponse> response = ParseInferResponse(answer->body, std::nullopt);
  return response.ok() ? response->model_version : "unparsable";
}

TEST_F(ServiceTest, SwapDrainsTheOldVersionWhileTheNewOneServes) {
  model_->set_open(false);
  auto held = std::async(std::launch::async, [&] { return Infer(Ones(1), false); });
  ASSERT_TRUE(model_->WaitForCalls(1));
  auto swap = std::async(std::launch::async, [&] {
    return service_->Swap("fake", std::make_shared<FakeModel>("2"), BatcherOptions{});
  });
  ASSERT_TRUE(testing::WaitUntil([&] { return service_->ServedVersion("fake") == "2"; },
                                 std::chrono::seconds(20)));
  // New requests reach version 2 while version 1 still holds one in flight.
  EXPECT_EQ(VersionOf(Infer(Ones(1), false)), "2");
  EXPECT_EQ(swap.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  model_->set_open(true);
  EXPECT_EQ(VersionOf(held.get()), "1");  // drained, not failed
  ASSERT_OK(swap.get());
  ASSERT_OK_AND_ASSIGN(nlohmann::json meta, client_->JsonCall("GET", "/v2/models/fake", nullptr));
  EXPECT_EQ(meta["versions"], nlohmann::json::array({"2"}));
  ASSERT_OK_AND_ASSIGN(http::Response gone, client_->Get("/v2/models/fake/versions/1/ready"));
  EXPECT_EQ(gone.status, 404);
  EXPECT_THAT(service_->MetricsText(), Not(HasSubstr("version=\"1\"")));
  // Swapping in the version that serves already changes nothing.
  ASSERT_OK(service_->Swap("fake", std::make_shared<FakeModel>("2"), BatcherOptions{}));
  EXPECT_EQ(VersionOf(Infer(Ones(1), false)), "2");
}

TEST_F(ServiceTest, TheCanaryTakesItsShareByRequestId) {
  ASSERT_OK(service_->Swap("fake", std::make_shared<FakeModel>("2"), BatcherOptions{},
                           Service::Role::kCanary));
  ASSERT_OK(service_->SetCanaryPercent("fake", 30));
  EXPECT_EQ(service_->ServedVersion("fake", Service::Role::kCanary), "2");
  std::map<std::string, int> by_version;
  std::map<std::string, std::string> first_answer;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 100; ++i) {
      InferRequest request = Ones(1);
      request.id = "request-" + std::to_string(i);
      const std::string version = VersionOf(Infer(request, false));
      if (round == 0) {
        ++by_version[version];
        first_answer[request.id] = version;
      } else {
        EXPECT_EQ(version, first_answer[request.id]) << request.id << " changed version";
      }
    }
  }
  EXPECT_EQ(by_version["1"] + by_version["2"], 100);
  EXPECT_GE(by_version["2"], 18);  // 30% of 100 ids, by a hash
  EXPECT_LE(by_version["2"], 42);
  // Per-version metrics: both rounds counted where they were answered.
  const std::string metrics = service_->MetricsText();
  EXPECT_THAT(metrics, HasSubstr("nv_inference_request_success{model=\"fake\",version=\"2\"} " +
                                 std::to_string(2 * by_version["2"])));
  EXPECT_THAT(metrics, HasSubstr("nv_inference_request_success{model=\"fake\",version=\"1\"} " +
                                 std::to_string(2 * by_version["1"])));
  // A named version is never rerouted; 0% sends nothing to the canary.
  InferRequest request = Ones(1);
  EXPECT_EQ(VersionOf(Infer(request, false, "/v2/models/fake/versions/2/infer")), "2");
  ASSERT_OK(service_->SetCanaryPercent("fake", 0));
  for (int i = 0; i < 20; ++i) {
    request.id = "request-" + std::to_string(i);
    EXPECT_EQ(VersionOf(Infer(request, false)), "1");
  }
  // Promoted: the canary becomes the primary and version 1 is unloaded.
  ASSERT_OK(service_->Swap("fake", std::make_shared<FakeModel>("2"), BatcherOptions{}));
  EXPECT_EQ(service_->ServedVersion("fake", Service::Role::kCanary), "");
  ASSERT_OK_AND_ASSIGN(nlohmann::json meta, client_->JsonCall("GET", "/v2/models/fake", nullptr));
  EXPECT_EQ(meta["versions"], nlohmann::json::array({"2"}));
  EXPECT_TRUE(meta["parameters"]["canary"].is_null());
}

TEST_F(ServiceTest, RequestsWithoutIdsAreSpreadByArrival) {
  ASSERT_OK(service_->Swap("fake", std::make_shared<FakeModel>("2"), BatcherOptions{},
                           Service::Role::kCanary));
  ASSERT_OK(service_->SetCanaryPercent("fake", 50));
  ASSERT_OK_AND_ASSIGN(nlohmann::json meta, client_->JsonCall("GET", "/v2/models/fake", nullptr));
  EXPECT_EQ(meta["parameters"]["canary"]["version"], "2");
  EXPECT_EQ(meta["parameters"]["canary"]["percent"], 50);
  std::map<std::string, int> by_version;
  InferRequest request = Ones(1);
  request.id.clear();
  for (int i = 0; i < 60; ++i) ++by_version[VersionOf(Infer(request, false))];
  EXPECT_GE(by_version["2"], 15);
  EXPECT_GE(by_version["1"], 15);
  ASSERT_OK(service_->RemoveCanary("fake"));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(VersionOf(Infer(request, false)), "1");
}

TEST_F(ServiceTest, CanaryMistakesAreRefused) {
  EXPECT_STATUS(service_->SetCanaryPercent("fake", 101), StatusCode::kInvalidArgument);
  EXPECT_STATUS(service_->SetCanaryPercent("nope", 10), StatusCode::kNotFound);
  EXPECT_STATUS(service_->RemoveCanary("fake"), StatusCode::kNotFound);
  EXPECT_STATUS(service_->Swap("nope", std::make_shared<FakeModel>("2"), BatcherOptions{},
                               Service::Role::kCanary),
                StatusCode::kNotFound);
  BatcherOptions bad;
  bad.max_batch = 0;
  EXPECT_FALSE(service_->Swap("fake", std::make_shared<FakeModel>("3"), bad).ok());
  EXPECT_EQ(service_->ServedVersion("fake"), "1");  // a failed swap leaves the old version
}

}  // namespace
}  // namespace reel::serve
