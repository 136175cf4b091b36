// train_bench: forward + backward + SGD step time of R(2+1)D-18 and a small R(2+1)D in Reel
// (LibTorch C++) beside the same torchvision model trained in Python PyTorch with the same
// threads, batch and input (bench/train_step_peer.py). Ratio = Reel / PyTorch (goal <= 1.0).
//
//   train_bench [--threads N] [--batch N] [--frames N] [--size N] [--steps N] [--json FILE]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench/report.h"
#include "models/video_resnet.h"
#include "testing/shell.h"

namespace {

double MedianStep(reel::models::VideoResNet& model, int batch, int frames, int size, int steps) {
  torch::manual_seed(0);
  model->train();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::Tensor x = torch::randn({batch, 3, frames, size, size});
  torch::Tensor y = torch::randint(0, 8, {batch}, torch::kLong);
  std::vector<double> times;
  for (int i = 0; i <= steps; ++i) {
    auto start = std::chrono::steady_clock::now();
    sgd.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    sgd.step();
    if (i > 0)
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  int threads = 2, batch = 2, frames = 8, size = 112, steps = 3;
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
      std::fprintf(
          stderr,
          "usage: train_bench [--threads N] [--batch N] [--frames N] [--size N] [--steps N]\n");
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
    double reel_s = MedianStep(model, batch, frames, size, steps);
    std::string args = v.peer_args + " " + std::to_string(threads) + " " + std::to_string(batch) +
                       " " + std::to_string(frames) + " " + std::to_string(size) + " " +
                       std::to_string(steps);
    if (v.width != 64) args += " 16 1 1 1 1";
    auto run =
        reel::testing::RunCommand("/usr/bin/python3 '" + peer + "' " + args + " 2>/dev/null");
    const double torch_s = std::atof(run.output.c_str());
    std::optional<reel::bench::Reference> peer;
    if (torch_s > 0) peer = reel::bench::Reference{torch_s, "torchvision in Python PyTorch"};
    report.Add({std::string(v.label) + " step", reel_s, "s", {}, peer});
  }
  return report.Finish(json);
}
