// Reel's reducer against PyTorch's DistributedDataParallel: from the same weights and batches,
// two ranks (several buckets, batch-norm buffers broadcast from rank 0, SGD with momentum) end
// with the same weights as two DDP processes of python3-torch over gloo (ddp_reference.py, which
// also says why the model is small rather than R(2+1)D-18).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "models/state_dict.h"
#include "parallel/reducer.h"
#include "parallel/testing/thread_world.h"
#include "testing/shell.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::parallel {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

torch::Tensor Get(const models::SafetensorsFile& file, const std::string& name) {
  auto t = models::FromTensorBytes(file.tensors.at(name), name);
  EXPECT_OK(t);
  return *t;
}

// ddp_reference.py's ParityNet.
struct ParityNetImpl : torch::nn::Module {
  ParityNetImpl() {
    conv1 =
        register_module("conv1", torch::nn::Conv3d(torch::nn::Conv3dOptions(3, 8, 3).padding(1)));
    bn1 = register_module("bn1", torch::nn::BatchNorm3d(8));
    conv2 = register_module(
        "conv2", torch::nn::Conv3d(torch::nn::Conv3dOptions(8, 16, 3).stride(2).padding(1)));
    fc = register_module("fc", torch::nn::Linear(16, 4));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn1->forward(conv1->forward(x)));
    x = torch::relu(conv2->forward(x)).mean({2, 3, 4});
    return fc->forward(x);
  }
  torch::nn::Conv3d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm3d bn1{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ParityNet);

TEST(DdpParityTest, MatchesPyTorchDistributedDataParallel) {
  constexpr int kSteps = 5, kWorld = 2, kPerRank = 2;
  reel::testing::TempDir dir_owner;
  const std::string dir = dir_owner.path();
  const std::string script = reel::testing::SourcePath("src/parallel/ddp_reference.py");
  auto run = reel::testing::RunCommand("/usr/bin/python3 " + script + " " + dir + " " +
                                       std::to_string(kSteps) + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto init = models::ReadSafetensors(ReadAll(std::string(dir) + "/init.safetensors"), "init");
  auto batches =
      models::ReadSafetensors(ReadAll(std::string(dir) + "/batches.safetensors"), "batches");
  auto expected = models::ReadSafetensors(ReadAll(std::string(dir) + "/ddp.safetensors"), "ddp");
  reel::testing::RunCommand(std::string("rm -rf ") + dir);
  ASSERT_TRUE(init.ok() && batches.ok() && expected.ok());

  torch::set_num_threads(1);
  std::vector<models::SafetensorsFile> finals(kWorld);
  std::vector<Status> statuses(kWorld);
  std::mutex build;
  CommOptions options;
  options.timeout = std::chrono::milliseconds(120000);
  testing::RunRanks(kWorld, options, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    torch::set_num_threads(1);  // OpenMP's thread count is per thread
    ParityNet model{nullptr};
    {
      std::lock_guard<std::mutex> lock(build);
      torch::manual_seed(100 + rank);
      model = ParityNet();
    }
    auto module = model.ptr();
    if (rank == 0) {  // rank 1 keeps its random start: the broadcast must replace it
      Status loaded = models::LoadStateDict(*module, *init);
      ASSERT_OK(loaded);
    }
    module->train();
    std::vector<torch::Tensor> state = module->parameters(), buffers = module->buffers();
    state.insert(state.end(), buffers.begin(), buffers.end());
    ASSERT_OK(comm->Broadcast(state, 0, "initial state"));
    std::vector<Reducer::NamedParameter> named;
    for (auto& p : module->named_parameters()) named.emplace_back(p.key(), p.value());
    ReducerOptions small;  // several buckets, as the reference's bucket_cap_mb
    small.first_bucket_bytes = 4096;
    small.bucket_cap_bytes = 4096;
    auto reducer = Reducer::Create(named, *comm, small);
    ASSERT_OK(reducer);
    torch::optim::SGD sgd(module->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int s = 0; s < kSteps; ++s) {
      torch::Tensor x =
          Get(*batches, "input." + std::to_string(s)).narrow(0, rank * kPerRank, kPerRank);
      torch::Tensor y =
          Get(*batches, "label." + std::to_string(s)).narrow(0, rank * kPerRank, kPerRank);
      sgd.zero_grad();
      ASSERT_OK(comm->Broadcast(buffers, 0, "buffers"));
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
      statuses[rank] = (*reducer)->Finish();
      ASSERT_OK(statuses[rank]);
      sgd.step();
    }
    finals[rank] = models::SaveStateDict(*module);
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_OK(statuses[r]);

  double worst = 0, moved = 0;
  std::string worst_name;
  int compared = 0;
  for (const auto& [name, bytes] : expected->tensors) {
    ASSERT_TRUE(finals[0].tensors.count(name)) << name;
    torch::Tensor ours = Get(finals[0], name), theirs = Get(*expected, name);
    if (!ours.is_floating_point()) {
      EXPECT_TRUE(torch::equal(ours, theirs)) << name;
      continue;
    }
    const double diff = (ours - theirs).abs().max().item<double>();
    moved = std::max(moved, (theirs - Get(*init, name)).abs().max().item<double>());
    if (diff > worst) {
      worst = diff;
      worst_name = name;
    }
    ++compared;
    // Batch-norm statistics are each rank's own, as in DDP; parameters must agree.
    if (name.find("running_") == std::string::npos) {
      EXPECT_TRUE(torch::equal(ours, Get(finals[1], name))) << "ranks disagree on " << name;
    }
  }
  EXPECT_EQ(compared, 10);  // 8 parameters, 2 running statistics
  EXPECT_GT(moved, 1e-3);   // training changed the weights
  EXPECT_LT(worst, 1e-5) << "largest difference in " << worst_name;
  std::printf("compared %d tensors; largest difference from PyTorch DDP %.3g (%s)\n", compared,
              worst, worst_name.c_str());
}

}  // namespace
}  // namespace reel::parallel
