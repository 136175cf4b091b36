// Pipeline parallelism on Reel's own video model: R(2+1)D profiled unit by unit, cut into two
// stages where the measured costs say, trained one step on two ranks over Gloo; every gradient
// equals one process's running the same micro-batches, for both schedules.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <mutex>

#include "models/video_resnet.h"
#include "parallel/partition.h"
#include "parallel/pipeline.h"
#include "parallel/testing/thread_world.h"
#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

using models::VideoResNet;

constexpr int kBatch = 6, kClasses = 4, kMicro = 3;

VideoResNet MakeModel() {
  models::VideoResNetOptions o;
  o.num_classes = kClasses;
  o.width = 4;
  o.layers = {1, 1, 1, 1};
  torch::manual_seed(11);  // every replica starts from the same weights
  return VideoResNet(o);
}

at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits, targets);
}

class PipelineModelTest : public ::testing::TestWithParam<PipelineSchedule> {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    torch::manual_seed(5);
    batch_ = torch::randn({kBatch, 3, 4, 24, 24});
    targets_ = torch::randint(kClasses, {kBatch}, torch::kLong);
    // One process over the same micro-batches (batch norm sees each micro-batch alone there too).
    VideoResNet model = MakeModel();
    const auto xs = batch_.tensor_split(kMicro), ys = targets_.tensor_split(kMicro);
    for (int i = 0; i < kMicro; ++i) {
      (Loss(model->forward(xs[i]), ys[i]) * (ys[i].size(0) / double(kBatch))).backward();
    }
    for (const auto& p : model->named_parameters()) grads_[p.key()] = p.value().grad().clone();
  }
  at::Tensor batch_, targets_;
  std::map<std::string, at::Tensor> grads_;
};

TEST_P(PipelineModelTest, TwoStagesCutByMeasuredCostGiveOneProcesssGradients) {
  VideoResNet probe = MakeModel();
  std::vector<std::string> names;
  for (int u = 0; u < probe->unit_count(); ++u) names.push_back(probe->unit_name(u));
  const std::vector<UnitCost> costs = ProfileUnits(
      names, [&](int u, const at::Tensor& x) { return probe->forward_units(x, u, u + 1); },
      [&](int u) { return probe->UnitParameters(u); }, batch_.tensor_split(kMicro)[0], 1);
  ASSERT_EQ(costs.size(), 6u);  // stem, four blocks, head
  for (const UnitCost& c : costs) EXPECT_GT(c.seconds, 0) << c.name;
  EXPECT_EQ(costs.back().parameter_bytes, (32 * kClasses + kClasses) * 4) << "the head: fc";
  ASSERT_OK_AND_ASSIGN(StagePlan plan, BalanceStages(costs, 2));

  std::vector<VideoResNet> replicas = {MakeModel(), MakeModel()};
  std::map<std::string, at::Tensor> got;
  std::mutex mu;
  testing::RunRanks(2, CommOptions{}, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    VideoResNet& model = replicas[rank];
    const int begin = plan.cuts[rank], end = plan.cuts[rank + 1];
    auto stage = PipelineStage::Make(
        comm, {kMicro, GetParam()},
        [&](const at::Tensor& x) { return model->forward_units(x, begin, end); }, Loss);
    ASSERT_OK(stage.status());
    ASSERT_OK(stage->Step(rank == 0 ? batch_ : at::Tensor(), rank == 1 ? targets_ : at::Tensor())
                  .status());
    std::lock_guard<std::mutex> lock(mu);
    for (int u = begin; u < end; ++u) {
      for (const auto& p : model->named_parameters()) {
        if (model->UnitOwns(u, p.key())) got[p.key()] = p.value().grad();
      }
    }
  });
  ASSERT_EQ(got.size(), grads_.size());
  for (const auto& [name, grad] : grads_) {
    ASSERT_TRUE(got.at(name).defined()) << name;
    EXPECT_LT((got.at(name) - grad).abs().max().item<double>(), 1e-5) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineModelTest,
                         ::testing::Values(PipelineSchedule::kGPipe, PipelineSchedule::k1F1B));

}  // namespace
}  // namespace reel::parallel
