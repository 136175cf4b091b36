// train_bench: forward + backward + SGD step time of R(2+1)D-18 and the main job's small
// R(2+1)D in Reel (LibTorch C++) beside the same torchvision model trained in Python PyTorch with
// the same threads, batch and input (bench/train_step_peer.py), and against the machine: its
// peak on the same threads (the faster of LibTorch's 2048^3 SGEMM, through its BLAS, and a large
// 3x3 convolution, through oneDNN, which runs the models' convolutions) is the limit, and the
// model's FLOP/s, forward and backward separately, are its share of it (model FLOPs utilisation).
// The FLOPs are counted from the convolutions and matrix products LibTorch runs
// (bench/op_profile.h); a per-operator profile of one step says where the time goes.
//
//   train_bench [--threads N] [--batch N] [--frames N] [--size N] [--steps N] [--json FILE]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "bench/op_profile.h"
#include "bench/report.h"
#include "models/video_resnet.h"
#include "testing/shell.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The best FLOP/s of `run` (doing `flops`) over a few runs after a warm-up.
double BestRate(double flops, const std::function<void()>& run) {
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    const auto start = Clock::now();
    run();
    const double s = Since(start);
    if (i > 0) best = std::max(best, flops / s);
  }
  return best;
}

// What this machine gives LibTorch on these threads: a 2048^3 matrix product (its BLAS) and a
// large 3x3 convolution (oneDNN, which runs the models' convolutions with wider vector kernels
// than the BLAS); the peak is the faster.
double SgemmPeak() {
  const int64_t n = 2048;
  torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  return BestRate(2.0 * n * n * n, [&] { (void)torch::mm(a, b); });
}

double ConvPeak() {
  const int64_t batch = 4, channels = 256, side = 28;
  torch::Tensor x = torch::randn({batch, channels, side, side});
  torch::Tensor w = torch::randn({channels, channels, 3, 3});
  const double flops = 2.0 * batch * channels * side * side * channels * 9;
  return BestRate(flops, [&] { (void)torch::conv2d(x, w, {}, 1, 1); });
}

struct StepTimes {
  double forward = 0, step = 0;  // medians; backward + SGD = step - forward
};

StepTimes Time(reel::models::VideoResNet& model, const torch::Tensor& x, const torch::Tensor& y,
               int steps) {
  torch::manual_seed(0);
  model->train();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  std::vector<double> forward, step;
  for (int i = 0; i <= steps; ++i) {
    const auto start = Clock::now();
    sgd.zero_grad();
    torch::Tensor logits = model->forward(x);
    const double f = Since(start);
    torch::nn::functional::cross_entropy(logits, y).backward();
    sgd.step();
    if (i > 0) {  // the first step warms LibTorch's kernels up
      forward.push_back(f);
      step.push_back(Since(start));
    }
  }
  return {Median(forward), Median(step)};
}

// One profiled step: the operators of the forward pass, and of the backward pass and SGD.
std::pair<std::vector<reel::bench::OpStats>, std::vector<reel::bench::OpStats>> Profile(
    reel::models::VideoResNet& model, const torch::Tensor& x, const torch::Tensor& y) {
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  sgd.zero_grad();
  torch::Tensor logits;
  std::vector<reel::bench::OpStats> forward, backward;
  {
    reel::bench::OpProfile profile;
    logits = model->forward(x);
    forward = profile.Finish();
  }
  {
    reel::bench::OpProfile profile;
    torch::nn::functional::cross_entropy(logits, y).backward();
    sgd.step();
    backward = profile.Finish();
  }
  return {forward, backward};
}

void PrintOps(const char* what, const std::vector<reel::bench::OpStats>& ops, double peak) {
  double total = 0;
  for (const auto& op : ops) total += op.self_seconds;
  std::printf("  %s, by self time (profiled, so slower than the timed runs):\n", what);
  for (size_t i = 0; i < ops.size() && i < 8; ++i) {
    const auto& op = ops[i];
    if (op.flops > 0 && op.self_seconds < 0.01 * total) continue;  // its kernel is listed
    std::printf("    %-40s %5lld calls %8.1f ms %5.1f%%", op.name.c_str(),
                static_cast<long long>(op.calls), 1e3 * op.self_seconds,
                total > 0 ? 100 * op.self_seconds / total : 0.0);
    if (op.flops > 0) {
      std::printf("  %6.1f GFLOP/s (%.0f%% of the peak)", op.flops / op.seconds / 1e9,
                  100 * op.flops / op.seconds / peak);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  reel::RetainFreedHeapMemory();  // the heap settings of `reel`, which these steps stand for
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  int threads = 2, batch = 2, frames = 8, size = 112, steps = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--threads")
      threads = v;
    else if (a == "--batch")
      batch = v;
    else if (a == "--frames")
      frames = v;
    else if (a == "--size")
      size = v;
    else if (a == "--steps")
      steps = v;
    else {
      std::fprintf(stderr,
                   "usage: train_bench [--threads N] [--batch N] [--frames N] [--size N] "
                   "[--steps N] [--json FILE]\n");
      return 2;
    }
  }
  torch::set_num_threads(threads);
  const char* source = std::getenv("REEL_SOURCE_DIR");
  std::string peer = std::string(source ? source : ".") + "/bench/train_step_peer.py";
  std::printf(
      "input %d x 3 x %d x %d x %d, %d threads, median of %d steps (forward + backward + SGD)\n",
      batch, frames, size, size, threads, steps);
  reel::bench::Report report("train_bench", threads);
  const double sgemm = SgemmPeak(), conv = ConvPeak(), peak = std::max(sgemm, conv);
  const reel::bench::Reference limit{peak / 1e9, "the machine's peak (best of SGEMM, conv)"};
  report.Add({"SGEMM 2048^3 (LibTorch's BLAS)", sgemm / 1e9, "GFLOP/s", {}, {}});
  report.Add({"3x3 convolution 256 -> 256 on 28^2 (oneDNN)", conv / 1e9, "GFLOP/s", {}, {}});
  struct Variant {
    const char* label;
    int width;
    std::array<int, 4> layers;
    std::string peer_args;
  };
  for (const Variant& v :
       {Variant{"R(2+1)D-18", 64, {2, 2, 2, 2}, "r2plus1d_18"},
        Variant{"R(2+1)D small (width 16, 1-1-1-1)", 16, {1, 1, 1, 1}, "r2plus1d_small"}}) {
    reel::models::VideoResNetOptions o;
    o.arch = reel::models::VideoArch::kR2Plus1D;
    o.num_classes = 8;
    o.width = v.width;
    o.layers = v.layers;
    reel::models::VideoResNet model(o);
    torch::Tensor x = torch::randn({batch, 3, frames, size, size});
    torch::Tensor y = torch::randint(0, 8, {batch}, torch::kLong);
    const StepTimes t = Time(model, x, y, steps);
    const auto [forward_ops, backward_ops] = Profile(model, x, y);
    const double forward_flops = reel::bench::TotalFlops(forward_ops);
    const double backward_flops = reel::bench::TotalFlops(backward_ops);
    std::printf("%s: %.2f GFLOP forward, %.2f GFLOP backward per step\n", v.label,
                forward_flops / 1e9, backward_flops / 1e9);
    PrintOps("forward", forward_ops, peak);
    PrintOps("backward + SGD", backward_ops, peak);

    std::string args = v.peer_args + " " + std::to_string(threads) + " " + std::to_string(batch) +
                       " " + std::to_string(frames) + " " + std::to_string(size) + " " +
                       std::to_string(steps);
    if (v.width != 64) args += " 16 1 1 1 1";
    auto run =
        reel::testing::RunCommand("/usr/bin/python3 '" + peer + "' " + args + " 2>/dev/null");
    const double torch_s = std::atof(run.output.c_str());
    std::optional<reel::bench::Reference> torchvision;
    if (torch_s > 0) torchvision = reel::bench::Reference{torch_s, "torchvision in Python PyTorch"};
    const std::string name = v.label;
    report.Add({name + " step", t.step, "s", {}, torchvision});
    report.Add({name + " forward", forward_flops / t.forward / 1e9, "GFLOP/s", limit, {}});
    report.Add({name + " backward + SGD",
                backward_flops / (t.step - t.forward) / 1e9,
                "GFLOP/s",
                limit,
                {}});
  }
  return report.Finish(json);
}
