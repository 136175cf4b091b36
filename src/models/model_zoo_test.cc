#include "models/model_zoo.h"

#include <gtest/gtest.h>

#include "models/video_resnet.h"
#include "testing/status_matchers.h"

namespace reel::models {
namespace {

TEST(ModelZooTest, EveryNamedModelMapsClipsToLogits) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 3, 4, 32, 32});
  for (const std::string& name : ModelNames()) {
    if (name == "head") continue;  // maps features, not clips: below
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

TEST(ModelZooTest, AHeadMapsFeaturesToLogitsAndNeedsTheirWidth) {
  torch::NoGradGuard no_grad;
  ModelSpec spec;
  spec.name = "head";
  spec.num_classes = 5;
  EXPECT_STATUS(BuildModel(spec), StatusCode::kInvalidArgument);  // in_features unknown
  spec.in_features = 16;
  spec.hidden = {7};
  ASSERT_OK_AND_ASSIGN(torch::nn::AnyModule head, BuildModel(spec));
  auto params = head.ptr()->named_parameters();
  ASSERT_TRUE(params.contains("fc.0.weight"));
  EXPECT_EQ(params["fc.0.weight"].sizes(), (std::vector<int64_t>{7, 16}));
  EXPECT_EQ(params["fc.2.weight"].sizes(), (std::vector<int64_t>{5, 7}));
  torch::Tensor f = torch::randn({2, 16});
  torch::Tensor y = head.forward(f);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 5}));
  // The loader's feature batches are [B, D, 1, 1, 1].
  EXPECT_TRUE(torch::equal(head.forward(f.view({2, 16, 1, 1, 1})), y));
  torch::Tensor expected = torch::relu(f.matmul(params["fc.0.weight"].t()) + params["fc.0.bias"])
                               .matmul(params["fc.2.weight"].t()) +
                           params["fc.2.bias"];
  EXPECT_LT((y - expected).abs().max().item<double>(), 1e-5);
}

TEST(ModelZooTest, AClassifierOnAnEarlierStageLeavesTheLaterStagesOut) {
  torch::NoGradGuard no_grad;
  VideoResNetOptions o;
  o.num_classes = 3;
  o.width = 8;
  o.layers = {1, 1, 1, 1};
  o.head_stage = 2;
  VideoResNet net(o);
  net->eval();
  int later = 0;
  for (const auto& p : net->named_parameters()) {
    later += p.key().rfind("layer3.", 0) == 0 || p.key().rfind("layer4.", 0) == 0;
  }
  EXPECT_EQ(later, 0);
  auto params = net->named_parameters();
  ASSERT_TRUE(params.contains("fc.weight"));  // one Linear keeps torchvision's name
  EXPECT_EQ(params["fc.weight"].sizes(), (std::vector<int64_t>{3, 16}));
  torch::Tensor x = torch::randn({2, 3, 4, 32, 32});
  torch::Tensor f = net->features(x, 2);
  EXPECT_EQ(f.sizes(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(net->features(x, 1).sizes(), (std::vector<int64_t>{2, 8}));
  torch::Tensor logits = f.matmul(params["fc.weight"].t()) + params["fc.bias"];
  EXPECT_LT((net->forward(x) - logits).abs().max().item<double>(), 1e-5);
}

TEST(ModelZooTest, TheClassifierKeysAreReadAndTheirErrorsNameTheKey) {
  auto parse = [](const std::string& model) {
    auto config = ConfigNode::LoadString("model:\n" + model, "train.yaml");
    EXPECT_OK(config);
    return ModelSpecFromConfig(config->Child("model").value());
  };
  ASSERT_OK_AND_ASSIGN(
      ModelSpec spec,
      parse("  name: r2plus1d\n  num_classes: 8\n  layer: layer3\n  hidden: [32]\n"));
  EXPECT_EQ(spec.head_stage, 3);
  EXPECT_EQ(spec.hidden, std::vector<int>{32});
  ASSERT_OK_AND_ASSIGN(spec, parse("  name: head\n  num_classes: 8\n  in_features: 128\n"));
  EXPECT_EQ(spec.in_features, 128);
  for (const char* bad : {"  name: r2plus1d\n  num_classes: 8\n  layer: layer7\n",
                          "  name: r2plus1d\n  num_classes: 8\n  in_features: 4\n",
                          "  name: tsn\n  num_classes: 8\n  hidden: [4]\n",
                          "  name: head\n  num_classes: 8\n  hidden: [0]\n"}) {
    auto refused = parse(bad);
    EXPECT_STATUS(refused, StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("train.yaml:"), std::string::npos) << bad;
  }
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
