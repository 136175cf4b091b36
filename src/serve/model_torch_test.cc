// Real LibTorch models behind the service: a checkpoint of the previous release loads and
// answers, and loading and unloading versions 100 times keeps the process's memory bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "base/random.h"
#include "serve/model.h"
#include "serve/service.h"
#include "serve/stages.h"
#include "testing/shell.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "train/amp.h"

namespace reel::serve {
namespace {

std::string Checkpoint() { return reel::testing::SourcePath("testdata/checkpoints/release-0.1.0"); }

// A loaded model under another version number, so each cycle swaps in a new version.
class Renumbered : public Model {
 public:
  Renumbered(std::unique_ptr<Model> inner, int version) : inner_(std::move(inner)) {
    info_ = inner_->info();
    info_.version = std::to_string(version);
    ++live;
  }
  ~Renumbered() override { --live; }
  static inline std::atomic<int> live{0};
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    return inner_->Forward(input, n);
  }

 private:
  std::unique_ptr<Model> inner_;
};

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(ModelTorch, ACheckpointOfThePreviousReleaseAnswers) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> model, LoadModel(Checkpoint(), LoadOptions{}));
  const ModelInfo& info = model->info();
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{3, 4, 24, 24}));
  EXPECT_EQ(info.num_classes(), 8);
  EXPECT_EQ(info.platform, "reel_libtorch");
  std::vector<float> input(static_cast<size_t>(2 * info.sample_size()), 0.25f);
  ASSERT_OK_AND_ASSIGN(std::vector<float> logits, model->Forward(input.data(), 2));
  ASSERT_EQ(logits.size(), 16u);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
  for (int k = 0; k < 8; ++k) EXPECT_FLOAT_EQ(logits[k], logits[8 + k]);  // same input, same row
}

// Model parallel: the second half in a stage server (here in-process; `reel serve --stages 2`
// starts it as a process) answers with one process's scores, and each side holds part of the
// weights.
TEST(ModelTorch, TwoStagesAnswerWithOneProcesssScores) {
  StageServerOptions so;
  so.source = Checkpoint();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StageServer> stage, StageServer::Start(so));
  EXPECT_GT(stage->from_unit(), 0);
  EXPECT_LT(stage->from_unit(), stage->unit_count());
  EXPECT_GT(stage->parameter_bytes(), 0);
  LoadOptions split;
  split.stages = 2;
  split.stage_address = stage->address();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> staged, LoadModel(Checkpoint(), split));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> whole, LoadModel(Checkpoint(), LoadOptions{}));
  EXPECT_THAT(staged->info().placement, ::testing::HasSubstr("at " + stage->address()));
  EXPECT_EQ(staged->info().num_classes(), whole->info().num_classes());
  Rng rng(11);
  std::vector<float> input(static_cast<size_t>(3 * whole->info().sample_size()));
  for (float& v : input) v = static_cast<float>(rng.Uniform() * 2 - 1);
  ASSERT_OK_AND_ASSIGN(std::vector<float> expected, whole->Forward(input.data(), 3));
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, staged->Forward(input.data(), 3));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

TEST(ModelTorch, StagesRefuseWhatTheyCannotSplit) {
  LoadOptions three;
  three.stages = 3;
  EXPECT_STATUS(LoadModel(Checkpoint(), three), StatusCode::kInvalidArgument);
  LoadOptions two;
  two.stages = 2;
  two.stage_address = "127.0.0.1:1";  // nothing listens: the warm-up forward cannot reach it
  EXPECT_STATUS(LoadModel(Checkpoint(), two), StatusCode::kUnavailable);
  StageServerOptions so;
  so.source = Checkpoint();
  so.from_unit = 0;
  EXPECT_STATUS(StageServer::Start(so), StatusCode::kInvalidArgument);
  so.from_unit = -1;
  so.source = "model.pt";
  EXPECT_STATUS(StageServer::Start(so), StatusCode::kInvalidArgument);
}

// bf16 autocast gives the fp32 scores to bf16's precision (emulated where the CPU lacks bf16
// units, so this holds on every machine), and the same class for a clear input.
TEST(ModelTorch, Bf16ServesTheFp32ScoresToBf16Precision) {
  LoadOptions bf16;
  bf16.precision = Precision::kBf16;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> exact, LoadModel(Checkpoint(), LoadOptions{}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> fast, LoadModel(Checkpoint(), bf16));
  Rng rng(7);
  std::vector<float> input(static_cast<size_t>(2 * exact->info().sample_size()));
  for (float& v : input) v = static_cast<float>(rng.Uniform() * 2 - 1);
  ASSERT_OK_AND_ASSIGN(std::vector<float> a, exact->Forward(input.data(), 2));
  ASSERT_OK_AND_ASSIGN(std::vector<float> b, fast->Forward(input.data(), 2));
  ASSERT_EQ(a.size(), b.size());
  double largest = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::abs(double{a[i]}));
    worst = std::max(worst, std::abs(double{a[i]} - b[i]));
  }
  EXPECT_GT(worst, 0) << "bf16 computes differently";
  EXPECT_LT(worst, 0.05 * largest + 1e-3) << "but close";
}

// A TorchScript model saved by Python PyTorch (convolution, batch norm with trained statistics,
// pooling, a linear head) is served frozen and optimized for inference, and answers as PyTorch
// does for a batch of two; under bf16 it is served as saved.
TEST(ModelTorch, TorchScriptIsServedOptimizedWithPyTorchsAnswers) {
  reel::testing::TempDir dir;
  const std::string script = dir.path() + "/make.py";
  std::ofstream(script) << R"PY(
import json, sys, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1), bias=False)
        self.bn = torch.nn.BatchNorm3d(8)
        self.fc = torch.nn.Linear(8, 4)
    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3, 4)))
torch.manual_seed(0)
net = Net()
net.bn.running_mean.uniform_(-0.5, 0.5)
net.bn.running_var.uniform_(0.5, 2.0)
model = torch.jit.script(net.eval())
model.save(sys.argv[1] + "/net.pt")
x = (torch.arange(2 * 3 * 2 * 8 * 8) % 17).reshape(2, 3, 2, 8, 8).float() / 17 - 0.5
print(json.dumps(model(x).flatten().tolist()))
)PY";
  const auto made = reel::testing::RunCommand("/usr/bin/python3 " + script + " " + dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::vector<double> want;
  for (const auto& v : nlohmann::json::parse(made.output)) want.push_back(v.get<double>());
  std::ofstream(dir.path() + "/net.yaml") << "data: {clip_frames: 2, size: 8}\n";
  LoadOptions options;
  options.config = dir.path() + "/net.yaml";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> model, LoadModel(dir.path() + "/net.pt", options));
  EXPECT_EQ(model->info().optimization, "frozen, optimized for inference");
  std::vector<float> x(2 * 3 * 2 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) / 17 - 0.5f;
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, model->Forward(x.data(), 2));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;

  options.precision = Precision::kBf16;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> saved, LoadModel(dir.path() + "/net.pt", options));
  EXPECT_EQ(saved->info().optimization, "");
}

TEST(ModelTorch, PrecisionsByName) {
  ASSERT_OK_AND_ASSIGN(Precision fp32, ParsePrecision("fp32"));
  EXPECT_EQ(fp32, Precision::kFp32);
  ASSERT_OK_AND_ASSIGN(Precision bf16, ParsePrecision("bf16"));
  EXPECT_STREQ(PrecisionName(bf16), "bf16");
  ASSERT_OK_AND_ASSIGN(Precision any, ParsePrecision("auto"));
  EXPECT_EQ(any, train::CpuHasNativeBf16() ? Precision::kBf16 : Precision::kFp32);
  EXPECT_STATUS(ParsePrecision("fp16"), StatusCode::kInvalidArgument);
}

TEST(ModelTorch, AHundredLoadUnloadCyclesKeepMemoryBounded) {
  SetComputeThreads(1);
  Service service;
  std::vector<float> input;
  int64_t after_warmup = 0;
  for (int cycle = 1; cycle <= 100; ++cycle) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> loaded, LoadModel(Checkpoint(), LoadOptions{}));
    auto model = std::make_shared<Renumbered>(std::move(loaded), cycle);
    input.assign(static_cast<size_t>(model->info().sample_size()), 0.5f);
    ASSERT_OK(model->Forward(input.data(), 1).status());
    // Swap drains and unloads the previous version before it returns.
    ASSERT_OK(service.Swap("tiny", std::move(model), BatcherOptions{}));
    ASSERT_EQ(service.ServedVersion("tiny"), std::to_string(cycle));
    ASSERT_EQ(Renumbered::live, 1) << "cycle " << cycle << ": an unloaded version is still alive";
    if (cycle == 10) after_warmup = ResidentBytes();
  }
  const int64_t growth = ResidentBytes() - after_warmup;
  std::printf("resident memory after 10 cycles %.1f MiB, growth over the next 90: %.2f MiB\n",
              after_warmup / 1048576.0, growth / 1048576.0);
  // One load holds a few MiB (weights, graph, allocator caches); a leak of even 0.2 MiB a cycle
  // would pass 16 MiB over 90 cycles. AddressSanitizer keeps freed memory in quarantine on
  // purpose, so there only the count of live models above tells.
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(growth, 16 << 20);
#endif
}

}  // namespace
}  // namespace reel::serve
