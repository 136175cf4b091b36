// Pipeline stages on real Gloo process groups (a thread per rank over loopback): gradients equal
// one process's on the whole batch, for both schedules, with an uneven last micro-batch; 1F1B
// holds fewer micro-batches' activations than GPipe, as the schedules promise.
#include "dist/pipeline.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <mutex>

#include "dist/testing/thread_world.h"
#include "testing/status_matchers.h"

namespace reel::dist {
namespace {

constexpr int kBatch = 10, kIn = 8, kClasses = 5;

torch::nn::Sequential MakeModel() {
  torch::manual_seed(7);
  return torch::nn::Sequential(torch::nn::Linear(kIn, 16), torch::nn::ReLU(),
                               torch::nn::Linear(16, 16), torch::nn::Tanh(),
                               torch::nn::Linear(16, kClasses));
}

// Layers [begin, end) of `model` as one stage.
at::Tensor RunLayers(torch::nn::Sequential& model, size_t begin, size_t end, at::Tensor x) {
  for (auto it = model->begin() + begin; it != model->begin() + end; ++it) x = it->forward(x);
  return x;
}

at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits, targets);
}

struct Outcome {
  std::map<std::string, at::Tensor> grads;  // parameter name -> gradient
  double loss = 0;
  std::map<int, int> max_in_flight;  // stage -> micro-batches held at once
};

// The model split into stages at `cuts` ({0, 2, 4, 5}: three stages), trained one step.
Outcome RunPipeline(const std::vector<size_t>& cuts, PipelineOptions options,
                    const at::Tensor& batch, const at::Tensor& targets) {
  const int stages = static_cast<int>(cuts.size()) - 1;
  std::vector<torch::nn::Sequential> replicas;
  for (int s = 0; s < stages; ++s) replicas.push_back(MakeModel());  // the same weights each
  Outcome out;
  std::mutex mu;
  testing::RunRanks(stages, CommOptions{}, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    torch::nn::Sequential& model = replicas[rank];
    auto stage = PipelineStage::Make(
        comm, options,
        [&](const at::Tensor& x) { return RunLayers(model, cuts[rank], cuts[rank + 1], x); }, Loss);
    ASSERT_OK(stage.status());
    Result<PipelineStepResult> r =
        stage->Step(rank == 0 ? batch : at::Tensor(), rank == stages - 1 ? targets : at::Tensor());
    ASSERT_OK(r.status());
    std::lock_guard<std::mutex> lock(mu);
    out.max_in_flight[rank] = r->max_in_flight;
    if (rank == stages - 1) out.loss = r->loss;
    for (const auto& p : model->named_parameters()) {
      const size_t layer = std::stoul(p.key().substr(0, p.key().find('.')));
      if (layer >= cuts[rank] && layer < cuts[rank + 1]) out.grads[p.key()] = p.value().grad();
    }
  });
  return out;
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    torch::manual_seed(3);
    batch_ = torch::randn({kBatch, kIn});
    targets_ = torch::randint(kClasses, {kBatch}, torch::kLong);
    torch::nn::Sequential model = MakeModel();
    at::Tensor loss = Loss(model->forward(batch_), targets_);
    loss.backward();
    loss_ = loss.item<double>();
    for (const auto& p : model->named_parameters()) grads_[p.key()] = p.value().grad();
  }

  void ExpectSameAsOneProcess(const Outcome& o) {
    EXPECT_NEAR(o.loss, loss_, 1e-5);
    ASSERT_EQ(o.grads.size(), grads_.size());
    for (const auto& [name, grad] : grads_) {
      ASSERT_TRUE(o.grads.count(name) != 0 && o.grads.at(name).defined()) << name;
      EXPECT_LT((o.grads.at(name) - grad).abs().max().item<double>(), 1e-5) << name;
    }
  }

  at::Tensor batch_, targets_;
  double loss_ = 0;
  std::map<std::string, at::Tensor> grads_;
};

TEST_F(PipelineTest, GPipeOnThreeStagesGivesOneProcesssGradients) {
  const Outcome o = RunPipeline({0, 2, 4, 5}, {4, PipelineSchedule::kGPipe}, batch_, targets_);
  ExpectSameAsOneProcess(o);  // micro-batches of 3, 3, 2, 2
  for (int s = 0; s < 3; ++s) EXPECT_EQ(o.max_in_flight.at(s), 4) << "stage " << s;
}

TEST_F(PipelineTest, OneFOneBGivesTheSameGradientsHoldingAtMostStagesMinusS) {
  const Outcome o = RunPipeline({0, 2, 4, 5}, {4, PipelineSchedule::k1F1B}, batch_, targets_);
  ExpectSameAsOneProcess(o);
  EXPECT_EQ(o.max_in_flight.at(0), 3);
  EXPECT_EQ(o.max_in_flight.at(1), 2);
  EXPECT_EQ(o.max_in_flight.at(2), 1);
}

TEST_F(PipelineTest, FewerMicroBatchesThanStagesAndOneMicroBatchPerSample) {
  ExpectSameAsOneProcess(RunPipeline({0, 3, 5}, {1, PipelineSchedule::k1F1B}, batch_, targets_));
  ExpectSameAsOneProcess(
      RunPipeline({0, 1, 3, 5}, {10, PipelineSchedule::k1F1B}, batch_, targets_));
}

TEST(PipelineOptionsTest, BadSettingsAreRefused) {
  EXPECT_STATUS(ParsePipelineSchedule("zero-bubble"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePipelineSchedule("gpipe").value(), PipelineSchedule::kGPipe);
  testing::RunRanks(2, CommOptions{}, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    auto identity = [](const at::Tensor& x) { return x; };
    EXPECT_STATUS(PipelineStage::Make(comm, {0, PipelineSchedule::kGPipe}, identity),
                  StatusCode::kInvalidArgument);
    if (rank == 1) {
      EXPECT_STATUS(PipelineStage::Make(comm, {2, PipelineSchedule::kGPipe}, identity),
                    StatusCode::kInvalidArgument);  // the last stage without a loss
    }
    EXPECT_STATUS(comm->StartSend(at::zeros({1}), rank, 0, "to itself"),
                  StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace reel::dist
