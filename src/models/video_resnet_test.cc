// Reel's video ResNets against torchvision's: the same state_dict (exported by
// python3-torchvision at test time) gives the same logits.
#include "models/video_resnet.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "models/state_dict.h"
#include "testing/shell.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::models {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

torch::Tensor ToTensor(const TensorBytes& t) {
  torch::Tensor out = torch::empty(t.shape, torch::kFloat);
  std::memcpy(out.data_ptr(), t.data.data(), t.data.size());
  return out;
}

struct Case {
  const char* torchvision_name;
  VideoArch arch;
};

class ParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParityTest, TorchvisionWeightsGiveTheSameLogits) {
  reel::testing::TempDir dir_owner;
  const std::string dir = dir_owner.path();
  const std::string script = reel::testing::SourcePath("src/models/export_torchvision.py");
  auto run = testing::RunCommand("/usr/bin/python3 " + script + " " + GetParam().torchvision_name +
                                 " 8 " + dir + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto weights = ReadSafetensors(ReadAll(std::string(dir) + "/weights.safetensors"), "weights");
  auto io = ReadSafetensors(ReadAll(std::string(dir) + "/io.safetensors"), "io");
  testing::RunCommand(std::string("rm -rf ") + dir);
  ASSERT_TRUE(weights.ok() && io.ok());

  VideoResNetOptions o;
  o.arch = GetParam().arch;
  o.num_classes = 8;
  VideoResNet model(o);
  Status loaded = LoadStateDict(*model, *weights);
  ASSERT_OK(loaded);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor logits = model->forward(ToTensor(io->tensors["input"]));
  torch::Tensor expected = ToTensor(io->tensors["logits"]);
  ASSERT_EQ(logits.sizes(), expected.sizes());
  double diff = (logits - expected).abs().max().item<double>();
  EXPECT_LT(diff, 1e-4) << GetParam().torchvision_name;
  // And the weights Reel saves are the ones it loaded.
  SafetensorsFile saved = SaveStateDict(*model);
  EXPECT_EQ(saved.tensors.size(), weights->tensors.size());
  EXPECT_EQ(saved.tensors["fc.weight"].data, weights->tensors["fc.weight"].data);
}

INSTANTIATE_TEST_SUITE_P(Video, ParityTest,
                         ::testing::Values(Case{"r3d_18", VideoArch::kR3D},
                                           Case{"mc3_18", VideoArch::kMC3},
                                           Case{"r2plus1d_18", VideoArch::kR2Plus1D}),
                         [](const auto& info) { return std::string(info.param.torchvision_name); });

// A small variant: one block per stage.
VideoResNetOptions Small(VideoArch arch, int width, int num_classes) {
  VideoResNetOptions o;
  o.arch = arch;
  o.num_classes = num_classes;
  o.width = width;
  o.layers = {1, 1, 1, 1};
  return o;
}

TEST(VideoResNetTest, SmallVariantsTrainAStep) {
  const VideoResNetOptions o = Small(VideoArch::kR2Plus1D, 16, 4);
  torch::manual_seed(3);  // before construction: the initial weights come from this generator
  VideoResNet model(o);
  torch::Tensor x = torch::randn({4, 3, 4, 32, 32});
  torch::Tensor y = torch::tensor({1, 3, 0, 2});
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));
  // One step on a batch can go either way with batch norm in training mode; a few steps on the
  // same batch must fit it.
  double first = 0, last = 0;
  for (int step = 0; step < 8; ++step) {
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    (step == 0 ? first : last) = loss.item<double>();
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  EXPECT_LT(last, 0.5 * first);
  EXPECT_EQ(model->named_parameters().contains("layer1.0.conv1.0.0.weight"), true);
}

// The convolutions run on oneDNN where LibTorch would pick its BLAS path (a single clip); with
// oneDNN switched off they take LibTorch's own choice. Both give the same loss and gradients.
TEST(VideoResNetTest, OneDnnConvolutionsGiveLibTorchsGradients) {
  torch::manual_seed(5);
  VideoResNet model(Small(VideoArch::kR2Plus1D, 8, 4));
  const torch::Tensor x = torch::randn({1, 3, 4, 32, 32});
  const torch::Tensor y = torch::tensor({2});
  auto loss_and_grads = [&] {
    model->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    std::vector<torch::Tensor> out{loss.detach().clone()};
    for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const std::vector<torch::Tensor> one_dnn = loss_and_grads();
  at::globalContext().setUserEnabledMkldnn(false);
  const std::vector<torch::Tensor> native = loss_and_grads();
  at::globalContext().setUserEnabledMkldnn(true);
  ASSERT_EQ(one_dnn.size(), native.size());
  for (size_t i = 0; i < one_dnn.size(); ++i) {
    const double scale = native[i].abs().max().item<double>() + 1e-6;
    EXPECT_LT((one_dnn[i] - native[i]).abs().max().item<double>() / scale, 1e-4) << i;
  }
}

// Pipeline stages run the model as a chain of units: in order they are forward(), and every
// parameter belongs to exactly one unit.
TEST(VideoResNetTest, ItsUnitsChainedAreTheForwardAndOwnEveryParameterOnce) {
  VideoResNetOptions o;
  o.num_classes = 4;
  o.width = 8;
  o.layers = {2, 1, 1, 1};
  torch::manual_seed(3);
  VideoResNet model(o);
  model->eval();
  ASSERT_EQ(model->unit_count(), 7);  // stem, 5 blocks, head
  EXPECT_EQ(model->unit_name(2), "layer1.1");
  EXPECT_EQ(model->unit_name(6), "head");
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({2, 3, 4, 24, 24});
  const torch::Tensor whole = model->forward(x);
  const torch::Tensor chained = model->forward_units(model->forward_units(x, 0, 3), 3, 7);
  EXPECT_TRUE(torch::equal(whole, chained));
  for (const auto& p : model->named_parameters()) {
    int owners = 0;
    for (int u = 0; u < model->unit_count(); ++u) owners += model->UnitOwns(u, p.key()) ? 1 : 0;
    EXPECT_EQ(owners, 1) << p.key();
  }
}

TEST(VideoResNetTest, LoadingRefusesMissingAndUnexpectedTensors) {
  const VideoResNetOptions o = Small(VideoArch::kR3D, 8, 3);
  VideoResNet model(o);
  SafetensorsFile file = SaveStateDict(*model);
  EXPECT_OK(LoadStateDict(*model, file));
  SafetensorsFile extra = file;
  extra.tensors["head.weight"] = file.tensors["fc.weight"];
  EXPECT_NE(LoadStateDict(*model, extra).message().find("unexpected tensor 'head.weight'"),
            std::string::npos);
  SafetensorsFile missing = file;
  missing.tensors.erase("fc.bias");
  EXPECT_NE(LoadStateDict(*model, missing).message().find("missing tensor 'fc.bias'"),
            std::string::npos);
  VideoResNetOptions other = o;
  other.num_classes = 5;
  VideoResNet wider(other);
  EXPECT_STATUS(LoadStateDict(*wider, file), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::models
