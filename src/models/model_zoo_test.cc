#include "models/model_zoo.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::models {
namespace {

TEST(ModelZooTest, EveryNamedModelMapsClipsToLogits) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 3, 4, 32, 32});
  for (const std::string& name : ModelNames()) {
    ModelSpec spec;
    spec.name = name;
    spec.num_classes = 5;
    spec.width = name.find("_18") == std::string::npos ? 8 : 0;
    spec.layers = {1, 1, 1, 1};
    auto model = BuildModel(spec);
    ASSERT_OK(model) << name << ": " << model.status().ToString();
    model->ptr()->eval();
    torch::Tensor y = model->forward(x);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 5})) << name;
  }
}

TEST(ModelZooTest, FrameModelsCannotTellTimeReversedClipsApart) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({1, 3, 6, 32, 32});
  torch::Tensor reversed = x.flip(2);
  for (const char* name : {"tsn", "single_frame"}) {
    ModelSpec spec;
    spec.name = name;
    spec.num_classes = 3;
    spec.width = 8;
    auto model = BuildModel(spec).value();
    model.ptr()->eval();
    torch::Tensor a = model.forward(x), b = model.forward(reversed);
    if (std::string(name) == "tsn") {
      EXPECT_LT((a - b).abs().max().item<double>(), 1e-5);
    }
  }
  ModelSpec video;
  video.name = "r2plus1d";
  video.num_classes = 3;
  video.width = 8;
  video.layers = {1, 1, 1, 1};
  auto model = BuildModel(video).value();
  model.ptr()->eval();
  EXPECT_GT((model.forward(x) - model.forward(reversed)).abs().max().item<double>(), 1e-5);
}

TEST(ModelZooTest, ConfigErrorsNameTheKey) {
  auto config = ConfigNode::LoadString("model:\n  name: r4d\n  num_classes: 8\n", "train.yaml");
  ASSERT_OK(config);
  auto spec = ModelSpecFromConfig(config->Child("model").value());
  EXPECT_STATUS(spec, StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("train.yaml:2"), std::string::npos)
      << spec.status().ToString();
  EXPECT_NE(spec.status().message().find("unknown model 'r4d'"), std::string::npos);

  config = ConfigNode::LoadString("model:\n  name: r2plus1d\n  num_classes: 8\n  layers: [1, 1]\n",
                                  "t.yaml");
  EXPECT_NE(
      ModelSpecFromConfig(config->Child("model").value()).status().message().find("4 block counts"),
      std::string::npos);
  config = ConfigNode::LoadString("model:\n  name: tsn\n  num_classes: 8\n  widht: 4\n", "t.yaml");
  EXPECT_NE(ModelSpecFromConfig(config->Child("model").value())
                .status()
                .message()
                .find("unknown key 'model.widht'"),
            std::string::npos);
  config = ConfigNode::LoadString(
      "model:\n  name: r3d\n  num_classes: 8\n  width: 12\n  layers: [1, 2, 1, 1]\n", "t.yaml");
  auto ok = ModelSpecFromConfig(config->Child("model").value());
  ASSERT_OK(ok);
  EXPECT_EQ(ok->width, 12);
  EXPECT_EQ(ok->layers[1], 2);
}

}  // namespace
}  // namespace reel::models
