#include "parallel/reducer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "parallel/testing/thread_world.h"
#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

using testing::RunRanks;

// No batch norm: N ranks with batch b then equal one process with batch N*b. `head` is
// registered before `conv` but used after it, so gradient readiness differs from registration.
struct NetImpl : torch::nn::Module {
  explicit NetImpl(bool with_unused = false) {
    head = register_module("head", torch::nn::Linear(6, 5));
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(3, 6, 3).padding(1)));
    mid = register_module("mid", torch::nn::Linear(6, 6));
    if (with_unused) unused = register_module("unused", torch::nn::Linear(6, 6));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv->forward(x)).mean({2, 3, 4});
    return head->forward(torch::tanh(mid->forward(x)));
  }
  torch::nn::Linear head{nullptr}, mid{nullptr}, unused{nullptr};
  torch::nn::Conv3d conv{nullptr};
};
TORCH_MODULE(Net);

struct Data {
  std::vector<torch::Tensor> inputs, labels;  // per step, the whole global batch
};

Data MakeData(int steps, int batch) {
  torch::manual_seed(7);
  Data d;
  for (int s = 0; s < steps; ++s) {
    d.inputs.push_back(torch::randn({batch, 3, 4, 6, 6}));
    d.labels.push_back(torch::randint(0, 5, {batch}));
  }
  return d;
}

Net MakeNet(uint64_t seed, bool with_unused = false) {
  static std::mutex global_generator;  // ranks are threads sharing LibTorch's default generator
  std::lock_guard<std::mutex> lock(global_generator);
  torch::manual_seed(seed);
  return Net(with_unused);
}

std::vector<Reducer::NamedParameter> Named(Net& net) {
  std::vector<Reducer::NamedParameter> out;
  for (auto& p : net->named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

std::vector<torch::Tensor> ParamsOf(Net& net) { return net->parameters(); }

// One process, the whole batch, `steps` SGD steps.
std::vector<torch::Tensor> Reference(const Data& d, int steps) {
  Net net = MakeNet(1);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < steps; ++s) {
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(d.inputs[s]), d.labels[s]).backward();
    sgd.step();
  }
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

CommOptions ReducerComm() {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(20000);
  o.heartbeat_interval = std::chrono::milliseconds(100);
  return o;
}

// Trains on rank `rank`'s slice of each global batch, in `micro` micro-batches per step.
struct RankRun {
  std::vector<torch::Tensor> params;
  std::vector<std::vector<std::string>> layout_before, layout_after;
  ReducerStats stats;
  Status status;
};

RankRun TrainRank(Comm& comm, const Data& d, int steps, int micro, ReducerOptions options,
                  uint64_t seed) {
  RankRun run;
  Net net = MakeNet(seed);  // rank 1 starts elsewhere: the broadcast must fix that
  std::vector<torch::Tensor> state = ParamsOf(net);
  run.status = comm.Broadcast(state, 0, "initial parameters");
  if (!run.status.ok()) return run;
  auto reducer = Reducer::Create(Named(net), comm, options);
  if (!reducer.ok()) {
    run.status = reducer.status();
    return run;
  }
  run.layout_before = (*reducer)->BucketLayout();
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < steps; ++s) {
    sgd.zero_grad();
    const int64_t per_rank = d.inputs[s].size(0) / comm.world_size();
    const int64_t per_micro = per_rank / micro;
    for (int m = 0; m < micro; ++m) {
      const int64_t start = comm.rank() * per_rank + m * per_micro;
      (*reducer)->set_sync(m == micro - 1);
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          net->forward(d.inputs[s].narrow(0, start, per_micro)),
          d.labels[s].narrow(0, start, per_micro));
      (loss / micro).backward();
    }
    run.status = (*reducer)->Finish();
    if (!run.status.ok()) return run;
    sgd.step();
  }
  run.layout_after = (*reducer)->BucketLayout();
  run.stats = (*reducer)->stats();
  for (auto& p : net->parameters()) run.params.push_back(p.detach().clone());
  return run;
}

std::vector<RankRun> TrainRanks(int world, const Data& d, int steps, int micro,
                                ReducerOptions options) {
  torch::set_num_threads(1);
  std::vector<RankRun> runs(world);
  RunRanks(world, ReducerComm(), [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    runs[rank] = TrainRank(*comm, d, steps, micro, options, rank == 0 ? 1 : 99);
  });
  return runs;
}

double MaxDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

ReducerOptions SmallBuckets() {
  ReducerOptions o;
  o.first_bucket_bytes = 64;  // the head's bias alone
  o.bucket_cap_bytes = 1024;  // several buckets for a model of a few KB
  return o;
}

TEST(ReducerTest, TwoRanksEqualOneProcessWithTheWholeBatch) {
  Data d = MakeData(4, 8);
  std::vector<torch::Tensor> expected = Reference(d, 4);
  std::vector<RankRun> runs = TrainRanks(2, d, 4, 1, SmallBuckets());
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    EXPECT_LT(MaxDiff(runs[r].params, expected), 1e-5) << "rank " << r;
  }
  EXPECT_EQ(MaxDiff(runs[0].params, runs[1].params), 0.0);  // the ranks agree bit for bit
  EXPECT_GE(runs[0].stats.buckets, 3);
  EXPECT_GT(runs[0].stats.comm_s, 0.0);
  // Busy time counts the buckets' flights, not the gaps between them: within the whole span.
  EXPECT_GT(runs[0].stats.busy_s, 0.0);
  EXPECT_LE(runs[0].stats.busy_s, runs[0].stats.comm_s + 1e-6);
}

TEST(ReducerTest, BucketsFollowGradientReadinessAfterTheFirstStep) {
  Data d = MakeData(2, 4);
  std::vector<RankRun> runs = TrainRanks(2, d, 2, 1, SmallBuckets());
  ASSERT_OK(runs[0].status);
  // Registration order is head, conv, mid: the reversed start puts mid's bias first, but head's
  // gradients are ready first in backward.
  ASSERT_FALSE(runs[0].layout_before.empty());
  EXPECT_EQ(runs[0].layout_before[0], std::vector<std::string>{"mid.bias"});
  ASSERT_FALSE(runs[0].layout_after.empty());
  EXPECT_EQ(runs[0].layout_after[0].size(), 1u);
  EXPECT_EQ(runs[0].layout_after[0][0].rfind("head.", 0), 0u) << runs[0].layout_after[0][0];
  EXPECT_EQ(runs[0].layout_after, runs[1].layout_after);
}

TEST(ReducerTest, NoSyncAccumulationEqualsTheWholeBatch) {
  Data d = MakeData(3, 8);
  std::vector<torch::Tensor> expected = Reference(d, 3);
  std::vector<RankRun> runs = TrainRanks(2, d, 3, 2, SmallBuckets());
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    EXPECT_LT(MaxDiff(runs[r].params, expected), 1e-5) << "rank " << r;
  }
}

TEST(ReducerTest, Fp16CompressionStaysClose) {
  Data d = MakeData(3, 8);
  std::vector<torch::Tensor> expected = Reference(d, 3);
  ReducerOptions o = SmallBuckets();
  o.compression = GradCompression::kFp16;
  std::vector<RankRun> runs = TrainRanks(2, d, 3, 1, o);
  ASSERT_OK(runs[0].status);
  const double diff = MaxDiff(runs[0].params, expected);
  EXPECT_LT(diff, 2e-3);
  EXPECT_GT(diff, 0.0);  // it did go through half precision
  EXPECT_EQ(MaxDiff(runs[0].params, runs[1].params), 0.0);
}

TEST(ReducerTest, ParametersWithoutGradientAreNamed) {
  torch::set_num_threads(1);
  Data d = MakeData(1, 4);
  std::vector<Status> statuses(2);
  RunRanks(2, ReducerComm(), [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    Net net = MakeNet(1, /*with_unused=*/true);
    auto reducer = Reducer::Create(Named(net), *comm, SmallBuckets());
    ASSERT_OK(reducer);
    torch::nn::functional::cross_entropy(net->forward(d.inputs[0]), d.labels[0]).backward();
    statuses[rank] = (*reducer)->Finish();
  });
  for (const Status& s : statuses) {
    ASSERT_FALSE(s.ok());
    EXPECT_STATUS(s, StatusCode::kFailedPrecondition);
    EXPECT_NE(
        s.message().find("2 parameters got no gradient in step 1: unused.weight, unused.bias"),
        std::string::npos)
        << s.message();
  }
}

TEST(ReducerTest, RejectsBadOptions) {
  torch::set_num_threads(1);
  RunRanks(1, ReducerComm(), [&](int, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    Net net = MakeNet(1);
    ReducerOptions zero;
    zero.bucket_cap_bytes = 0;
    EXPECT_STATUS(Reducer::Create(Named(net), *comm, zero), StatusCode::kInvalidArgument);
    EXPECT_STATUS(Reducer::Create({}, *comm), StatusCode::kInvalidArgument);
    ReducerOptions bf16;
    bf16.compression = GradCompression::kBf16;
    auto made = Reducer::Create(Named(net), *comm, bf16);
    if (TORCH_VERSION_MAJOR < 2) {
      ASSERT_FALSE(made.ok());
      EXPECT_NE(made.status().message().find("use fp16 or none"), std::string::npos);
    }
    EXPECT_FALSE(ParseGradCompression("int8").ok());
  });
}

}  // namespace
}  // namespace reel::parallel
