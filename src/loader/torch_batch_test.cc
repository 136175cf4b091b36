#include "loader/torch_batch.h"

#include <gtest/gtest.h>

namespace reel::loader {
namespace {

TEST(TorchBatchTest, FloatBatchBecomesAFiveDimensionalTensorWithLabels) {
  Batch b;
  b.shape = {2, 3, 4, 5, 6};
  for (int i = 0; i < 2 * 3 * 4 * 5 * 6; ++i) b.f32.push_back(static_cast<float>(i) / 10);
  b.labels = {3, 7};
  TensorBatch t = ToTensors(std::move(b));
  EXPECT_EQ(t.clips.sizes(), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(t.clips.scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(t.clips[1][2][3][4][5].item<float>(), 719 / 10.f);
  EXPECT_EQ(t.labels.scalar_type(), at::kLong);
  EXPECT_EQ(t.labels[1].item<int64_t>(), 7);
  // The tensor keeps its data after the batch is gone and can be used in computation.
  EXPECT_NEAR(t.clips.sum().item<double>(), 0.1 * (719.0 * 720 / 2), 1.0);
}

TEST(TorchBatchTest, Uint8BatchStaysUint8) {
  Batch b;
  b.shape = {1, 3, 1, 2, 2};
  b.u8 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255};
  b.labels = {0};
  TensorBatch t = ToTensors(std::move(b));
  EXPECT_EQ(t.clips.scalar_type(), at::kByte);
  EXPECT_EQ(t.clips[0][2][0][1][1].item<uint8_t>(), 255);
}

}  // namespace
}  // namespace reel::loader
