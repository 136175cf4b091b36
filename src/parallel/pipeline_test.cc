// Pipeline stages on real Gloo process groups (a thread per rank over loopback): gradients equal
// one process's on the whole batch, for both schedules, with an uneven last micro-batch; 1F1B
// holds fewer micro-batches' activations than GPipe, as the schedules promise.
#include "parallel/pipeline.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <mutex>

#include "parallel/mesh.h"
#include "parallel/testing/thread_world.h"
#include "testing/status_matchers.h"

namespace reel::parallel {
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

// 2 replicas x 2 stages on 4 ranks: each replica pipelines its half of the batch, each stage's
// gradients are averaged over the replicas; the result is one process's on the whole batch
// running the same micro-batches.
TEST(HybridTest, TwoReplicasOfTwoStagesGiveOneProcesssGradients) {
  at::set_num_threads(1);
  constexpr int kReplicas = 2, kStages = 2, kMicro = 3, kGlobal = 12;
  torch::manual_seed(4);
  const at::Tensor batch = torch::randn({kGlobal, kIn});
  const at::Tensor targets = torch::randint(kClasses, {kGlobal}, torch::kLong);
  const auto shards = batch.tensor_split(kReplicas),
             shard_targets = targets.tensor_split(kReplicas);
  std::map<std::string, at::Tensor> want;
  {
    torch::nn::Sequential model = MakeModel();
    for (int d = 0; d < kReplicas; ++d) {
      const auto xs = shards[d].tensor_split(kMicro), ys = shard_targets[d].tensor_split(kMicro);
      for (int i = 0; i < kMicro; ++i) {
        const double weight = double(ys[i].size(0)) / shards[d].size(0) / kReplicas;
        (Loss(model->forward(xs[i]), ys[i]) * weight).backward();
      }
    }
    for (const auto& p : model->named_parameters()) want[p.key()] = p.value().grad().clone();
  }
  const std::vector<size_t> cuts = {0, 3, 5};
  std::vector<torch::nn::Sequential> replicas;
  for (int r = 0; r < kReplicas * kStages; ++r) replicas.push_back(MakeModel());
  std::vector<std::map<std::string, at::Tensor>> got(kReplicas);
  std::mutex mu;
  testing::RunRanks(kReplicas * kStages, CommOptions{}, [&](int rank, Comm* world) {
    ASSERT_NE(world, nullptr);
    ASSERT_OK_AND_ASSIGN(Mesh mesh, MakeMesh(*world, kStages));
    EXPECT_EQ(mesh.replica, rank / kStages);
    EXPECT_EQ(mesh.pipeline->rank(), mesh.stage);
    EXPECT_EQ(mesh.data->rank(), mesh.replica);
    torch::nn::Sequential& model = replicas[rank];
    const size_t begin = cuts[mesh.stage], end = cuts[mesh.stage + 1];
    auto stage = PipelineStage::Make(
        mesh.pipeline.get(), {kMicro, PipelineSchedule::k1F1B},
        [&](const at::Tensor& x) { return RunLayers(model, begin, end, x); }, Loss);
    ASSERT_OK(stage.status());
    ASSERT_OK(stage
                  ->Step(mesh.stage == 0 ? shards[mesh.replica] : at::Tensor(),
                         mesh.stage == kStages - 1 ? shard_targets[mesh.replica] : at::Tensor())
                  .status());
    std::vector<at::Tensor> mine;
    std::vector<std::string> names;
    for (const auto& p : model->named_parameters()) {
      const size_t layer = std::stoul(p.key().substr(0, p.key().find('.')));
      if (layer >= begin && layer < end) {
        mine.push_back(p.value());
        names.push_back(p.key());
      }
    }
    ASSERT_OK(AverageGradients(*mesh.data, mine));
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < mine.size(); ++i) got[mesh.replica][names[i]] = mine[i].grad();
    mesh.pipeline.reset();  // the groups go before the world's Comm
    mesh.data.reset();
  });
  for (int d = 0; d < kReplicas; ++d) {
    ASSERT_EQ(got[d].size(), want.size()) << "replica " << d;
    for (const auto& [name, grad] : want) {
      EXPECT_LT((got[d].at(name) - grad).abs().max().item<double>(), 1e-5)
          << "replica " << d << " " << name;
    }
  }
}

// The first stage reads the batch with its labels; ShareTargets brings them to the last. The
// gradient norm across both stages clips as torch.nn.utils.clip_grad_norm_ on one model does.
TEST(PipelineStageTest, TargetsTravelToTheLastStageAndClippingSpansTheStages) {
  at::set_num_threads(1);
  constexpr int kMicro = 2;
  torch::manual_seed(7);
  const at::Tensor batch = torch::randn({6, kIn});
  const at::Tensor targets = torch::randint(kClasses, {6}, torch::kLong);
  torch::nn::Sequential whole = MakeModel();
  for (int i = 0; i < kMicro; ++i) {
    (Loss(whole->forward(batch.tensor_split(kMicro)[i]), targets.tensor_split(kMicro)[i]) / kMicro)
        .backward();
  }
  const double max_norm = 0.05;
  const double want_norm = torch::nn::utils::clip_grad_norm_(whole->parameters(), max_norm);
  const std::vector<size_t> cuts = {0, 3, 5};
  std::vector<torch::nn::Sequential> stages = {MakeModel(), MakeModel()};
  std::vector<double> norms(2);
  testing::RunRanks(2, CommOptions{}, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    torch::nn::Sequential& model = stages[rank];
    for (size_t i = 0; i < model->parameters().size(); ++i) {
      torch::NoGradGuard no_grad;
      model->parameters()[i].copy_(whole->parameters()[i]);
    }
    const size_t begin = cuts[rank], end = cuts[rank + 1];
    ASSERT_OK_AND_ASSIGN(
        PipelineStage stage,
        PipelineStage::Make(
            comm, {kMicro, PipelineSchedule::k1F1B},
            [&](const at::Tensor& x) { return RunLayers(model, begin, end, x); }, Loss));
    ASSERT_OK_AND_ASSIGN(at::Tensor shared, stage.ShareTargets(rank == 0 ? targets : at::Tensor()));
    EXPECT_EQ(shared.defined(), rank == 1);
    if (rank == 1) {
      EXPECT_TRUE(torch::equal(shared, targets));
    }
    ASSERT_OK(stage.Step(rank == 0 ? batch : at::Tensor(), shared).status());
    std::vector<at::Tensor> mine;
    for (const auto& p : model->named_parameters()) {
      const size_t layer = std::stoul(p.key().substr(0, p.key().find('.')));
      if (layer >= begin && layer < end) mine.push_back(p.value());
    }
    ASSERT_OK_AND_ASSIGN(norms[rank], ClipGradNormAcross(*comm, mine, max_norm));
  });
  EXPECT_NEAR(norms[0], want_norm, 1e-5);
  EXPECT_NEAR(norms[1], want_norm, 1e-5);
  ASSERT_GT(want_norm, max_norm);  // so that clipping did something
  for (const auto& p : whole->named_parameters()) {
    const size_t layer = std::stoul(p.key().substr(0, p.key().find('.')));
    const at::Tensor got = stages[layer < cuts[1] ? 0 : 1]->named_parameters()[p.key()].grad();
    EXPECT_LT((got - p.value().grad()).abs().max().item<double>(), 1e-6) << p.key();
  }
}

TEST(HybridTest, AWorldThatIsNotWholePipelinesIsRefused) {
  testing::RunRanks(3, CommOptions{}, [&](int rank, Comm* world) {
    ASSERT_NE(world, nullptr);
    EXPECT_STATUS(MakeMesh(*world, 2), StatusCode::kInvalidArgument);
    EXPECT_STATUS(world->Split({0, 0}, "twice"), StatusCode::kInvalidArgument);
    if (rank != 2) {
      EXPECT_STATUS(world->Split({2}, "without-me"), StatusCode::kInvalidArgument);
    }
  });
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
}  // namespace reel::parallel
