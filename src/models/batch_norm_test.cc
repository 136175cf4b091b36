#include "models/batch_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace reel::models {
namespace {

// LibTorch's own BatchNorm3d (+ ReLU), the reference.
struct BnReference {
  torch::nn::BatchNorm3d bn;
  bool relu;
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = bn->forward(x);
    return relu ? torch::relu(y) : y;
  }
};

struct BnCase {
  std::vector<int64_t> shape;
  bool relu;
  float offset;  // added to the input: a large mean must not cost the variance its precision
};

class BatchNormReluTest : public ::testing::TestWithParam<BnCase> {};

TEST_P(BatchNormReluTest, TrainsAsBatchNorm3dThenRelu) {
  const BnCase& c = GetParam();
  torch::manual_seed(7);
  const int64_t features = c.shape[1];
  BatchNormRelu fused(BatchNormReluOptions{features, c.relu});
  BnReference ref{torch::nn::BatchNorm3d(features), c.relu};
  {
    torch::NoGradGuard no_grad;
    torch::Tensor w = torch::rand({features}) + 0.5, b = torch::randn({features});
    fused->weight.copy_(w);
    fused->bias.copy_(b);
    ref.bn->weight.copy_(w);
    ref.bn->bias.copy_(b);
  }
  torch::Tensor x = (torch::randn(c.shape) * 3 + c.offset).requires_grad_();
  torch::Tensor x_ref = x.detach().clone().requires_grad_();
  torch::Tensor upstream = torch::randn(c.shape);
  ASSERT_TRUE(FusedBatchNormApplies(x) || !__builtin_cpu_supports("avx2"));

  for (int step = 0; step < 2; ++step) {  // twice: the running statistics accumulate
    torch::Tensor y = fused->forward(x), y_ref = ref.forward(x_ref);
    EXPECT_TRUE(torch::allclose(y, y_ref, 1e-4, 1e-4)) << (y - y_ref).abs().max().item<float>();
    (y * upstream).sum().backward();
    (y_ref * upstream).sum().backward();
  }
  auto close = [](const torch::Tensor& a, const torch::Tensor& b, const char* what) {
    EXPECT_TRUE(torch::allclose(a, b, 1e-3, 1e-3))
        << what << ": worst difference " << (a - b).abs().max().item<float>();
  };
  close(x.grad(), x_ref.grad(), "input gradient");
  close(fused->weight.grad(), ref.bn->weight.grad(), "weight gradient");
  close(fused->bias.grad(), ref.bn->bias.grad(), "bias gradient");
  close(fused->running_mean, ref.bn->running_mean, "running mean");
  close(fused->running_var, ref.bn->running_var, "running variance");
  EXPECT_EQ(fused->num_batches_tracked.item<int64_t>(), 2);

  fused->eval();
  ref.bn->eval();
  close(fused->forward(x.detach()), ref.forward(x_ref.detach()), "evaluation");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BatchNormReluTest,
    ::testing::Values(BnCase{{2, 6, 4, 9, 7}, true, 0},    // 252 values a row: vectors and a tail
                      BnCase{{2, 6, 4, 9, 7}, false, 0},   // batch norm alone
                      BnCase{{1, 3, 2, 3, 1}, true, 0},    // rows shorter than one vector
                      BnCase{{3, 1, 2, 32, 32}, true, 0},  // one channel, long rows
                      BnCase{{2, 4, 2, 16, 16}, true, 1000}));

TEST(BatchNormReluTest, KeepsBatchNorm3dsStateDictNames) {
  BatchNormRelu fused(BatchNormReluOptions{5, true});
  torch::nn::BatchNorm3d ref(5);
  std::vector<std::string> ours, theirs;
  for (const auto& item : fused->named_parameters()) ours.push_back(item.key());
  for (const auto& item : fused->named_buffers()) ours.push_back(item.key());
  for (const auto& item : ref->named_parameters()) theirs.push_back(item.key());
  for (const auto& item : ref->named_buffers()) theirs.push_back(item.key());
  EXPECT_EQ(ours, theirs);
}

TEST(BatchNormReluTest, FallsBackWhereTheKernelsDoNotApply) {
  torch::Tensor strided = torch::randn({2, 3, 4, 4, 4}).transpose(3, 4);
  EXPECT_FALSE(FusedBatchNormApplies(strided));
  EXPECT_FALSE(FusedBatchNormApplies(torch::randn({2, 3, 4, 4, 4}, torch::kDouble)));
  // The fallback gives LibTorch's results all the same.
  BatchNormRelu fused(BatchNormReluOptions{3, true});
  torch::nn::BatchNorm3d ref(3);
  torch::Tensor y = fused->forward(strided), y_ref = torch::relu(ref->forward(strided));
  EXPECT_TRUE(torch::allclose(y, y_ref, 1e-5, 1e-5));
}

}  // namespace
}  // namespace reel::models
