// Mixed precision on CUDA: correctness checks of Reel's autocast scope and loss scaler, then the
// training step time of R(2+1)D-18 and a small R(2+1)D in fp32, fp16 (autocast + loss scaling)
// and bf16 (autocast), with the speed-up over fp32. Without a CUDA device it says so and exits 0
// (Debian's LibTorch has no CUDA; this runs where LibTorch does).
// Usage: amp_bench [--steps N] [--json FILE]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "bench/report.h"
#include "models/model_zoo.h"
#include "models/state_dict.h"
#include "train/amp.h"

namespace {

using reel::train::AutocastGuard;
using reel::train::GradScaler;

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

torch::nn::AnyModule Build(const std::string& name, int width, std::array<int, 4> layers,
                           int classes) {
  reel::models::ModelSpec spec;
  spec.name = name;
  spec.num_classes = classes;
  spec.width = width;
  spec.layers = layers;
  auto model = reel::models::BuildModel(spec);
  if (!model.ok()) {
    std::fprintf(stderr, "amp_bench: %s\n", model.status().ToString().c_str());
    std::exit(1);
  }
  return *model;
}

enum class Mode { kFp32, kFp16, kBf16 };
const char* ModeName(Mode m) {
  return m == Mode::kFp32 ? "fp32" : m == Mode::kFp16 ? "fp16" : "bf16";
}

// Median seconds of one SGD training step (forward, loss, backward, unscale, step).
double StepSeconds(torch::nn::AnyModule& model, Mode mode, const torch::Tensor& x,
                   const torch::Tensor& y, int steps) {
  auto module = model.ptr();
  module->train();
  torch::optim::SGD sgd(module->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  GradScaler scaler(mode == Mode::kFp16);
  std::vector<torch::Tensor> params = module->parameters();
  std::vector<double> times;
  for (int i = 0; i < steps + 3; ++i) {
    torch::cuda::synchronize();
    auto start = std::chrono::steady_clock::now();
    sgd.zero_grad();
    torch::Tensor logits;
    {
      AutocastGuard autocast(mode != Mode::kFp32,
                             mode == Mode::kBf16 ? torch::kBFloat16 : torch::kHalf);
      logits = model.forward(x);
    }
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), y);
    scaler.ScaleLoss(loss).backward();
    bool finite = scaler.Unscale(params);
    if (finite) sgd.step();
    scaler.Update(finite);
    torch::cuda::synchronize();
    if (i >= 3)
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  reel::RetainFreedHeapMemory();  // the heap settings of `reel`, which these steps stand for
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  int steps = 10;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max(1, std::atoi(argv[i + 1]));
  }
  if (!torch::cuda::is_available()) {
    std::printf("amp_bench: this LibTorch (%s) sees no CUDA device; nothing to check or measure\n",
                TORCH_VERSION);
    return 0;
  }
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(0);
  std::printf("amp_bench: LibTorch %s, %d CUDA device(s)\n", TORCH_VERSION,
              static_cast<int>(torch::cuda::device_count()));

  // 1. Autocast: half/bfloat16 activations, logits close to fp32, and the scope restores fp32.
  torch::nn::AnyModule small = Build("r2plus1d", 16, {1, 1, 1, 1}, 8);
  small.ptr()->to(cuda);
  small.ptr()->eval();
  torch::Tensor x = torch::randn({4, 3, 8, 112, 112}, torch::TensorOptions().device(cuda));
  {
    torch::NoGradGuard no_grad;
    torch::Tensor fp32 = small.forward(x);
    torch::Tensor fp16, bf16;
    {
      AutocastGuard autocast(true, torch::kHalf);
      fp16 = small.forward(x);
    }
    {
      AutocastGuard autocast(true, torch::kBFloat16);
      bf16 = small.forward(x);
    }
    torch::Tensor after = small.forward(x);
    const double scale = fp32.abs().max().item<double>();
    const double e16 = (fp16.to(torch::kFloat) - fp32).abs().max().item<double>();
    const double ebf = (bf16.to(torch::kFloat) - fp32).abs().max().item<double>();
    Check(fp16.scalar_type() == torch::kHalf, "fp16 autocast gives half logits");
    Check(bf16.scalar_type() == torch::kBFloat16, "bf16 autocast gives bfloat16 logits");
    Check(after.scalar_type() == torch::kFloat, "the scope restores fp32");
    Check(e16 <= 0.02 * scale + 1e-3,
          "fp16 logits within 2% of fp32 (max diff " + std::to_string(e16) + ")");
    Check(ebf <= 0.08 * scale + 1e-2,
          "bf16 logits within 8% of fp32 (max diff " + std::to_string(ebf) + ")");
  }

  // 2. Weights saved from the GPU load into a CPU model with the same logits.
  {
    torch::NoGradGuard no_grad;
    reel::models::SafetensorsFile weights = reel::models::SaveStateDict(*small.ptr());
    torch::nn::AnyModule cpu = Build("r2plus1d", 16, {1, 1, 1, 1}, 8);
    Check(reel::models::LoadStateDict(*cpu.ptr(), weights).ok(),
          "CUDA weights load into a CPU model");
    cpu.ptr()->eval();
    torch::Tensor xs = x.index({torch::indexing::Slice(0, 1)});
    double diff = (cpu.forward(xs.cpu()) - small.forward(xs).cpu()).abs().max().item<double>();
    Check(diff < 1e-3, "and give the GPU's logits (max diff " + std::to_string(diff) + ")");
    // And back onto the GPU.
    torch::nn::AnyModule back = Build("r2plus1d", 16, {1, 1, 1, 1}, 8);
    back.ptr()->to(cuda);
    Check(reel::models::LoadStateDict(*back.ptr(), reel::models::SaveStateDict(*cpu.ptr())).ok(),
          "CPU weights load into a CUDA model");
  }

  // 3. fp16 training with the loss scaler memorises a fixed batch.
  {
    small.ptr()->train();
    torch::Tensor labels =
        torch::randint(0, 8, {4}, torch::TensorOptions().device(cuda).dtype(torch::kLong));
    torch::optim::AdamW adam(small.ptr()->parameters(), torch::optim::AdamWOptions(2e-3));
    GradScaler scaler(true);
    std::vector<torch::Tensor> params = small.ptr()->parameters();
    double first = 0, last = 0;
    for (int i = 0; i < 60; ++i) {
      adam.zero_grad();
      torch::Tensor logits;
      {
        AutocastGuard autocast(true, torch::kHalf);
        logits = small.forward(x);
      }
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels);
      scaler.ScaleLoss(loss).backward();
      bool finite = scaler.Unscale(params);
      if (finite) adam.step();
      scaler.Update(finite);
      (i == 0 ? first : last) = loss.item<double>();
    }
    Check(last < 0.25 * first, "fp16 + loss scaling learns a fixed batch (loss " +
                                   std::to_string(first) + " -> " + std::to_string(last) + ")");
    // 4. A scale so large that fp16 gradients overflow: the step is skipped and the scale halved.
    GradScaler huge(true);
    huge.set_state({1e38, 0});
    adam.zero_grad();
    torch::Tensor logits;
    {
      AutocastGuard autocast(true, torch::kHalf);
      logits = small.forward(x);
    }
    huge.ScaleLoss(torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels))
        .backward();
    bool finite = huge.Unscale(params);
    huge.Update(finite);
    Check(!finite && huge.state().scale == 5e37,
          "overflowing gradients skip the step and halve the scale");
  }

  // 5. Step times.
  struct Case {
    const char* label;
    std::string name;
    int width;
    std::array<int, 4> layers;
    int64_t batch, frames;
  };
  const Case cases[] = {
      {"R(2+1)D-18", "r2plus1d_18", 0, {2, 2, 2, 2}, 16, 16},
      {"small R(2+1)D (width 16, 1 block/stage)", "r2plus1d", 16, {1, 1, 1, 1}, 32, 16}};
  reel::bench::Report report("amp_bench", 0);
  for (const Case& c : cases) {
    torch::nn::AnyModule model = Build(c.name, c.width, c.layers, 400);
    model.ptr()->to(cuda);
    torch::Tensor input =
        torch::randn({c.batch, 3, c.frames, 112, 112}, torch::TensorOptions().device(cuda));
    torch::Tensor target =
        torch::randint(0, 400, {c.batch}, torch::TensorOptions().device(cuda).dtype(torch::kLong));
    double base = 0;
    for (Mode mode : {Mode::kFp32, Mode::kFp16, Mode::kBf16}) {
      double s = StepSeconds(model, mode, input, target, steps);
      if (mode == Mode::kFp32) base = s;
      std::optional<reel::bench::Reference> fp32;
      if (mode != Mode::kFp32) fp32 = reel::bench::Reference{c.batch / base, "fp32, the same step"};
      report.Add({std::string(c.label) + " batch " + std::to_string(c.batch) + "x3x" +
                      std::to_string(c.frames) + "x112x112, " + ModeName(mode),
                  c.batch / s,
                  "clips/s",
                  {},
                  fp32});
    }
  }
  std::printf("%s\n", failures == 0 ? "all checks passed" : "CHECKS FAILED");
  const int written = report.Finish(json);
  return failures == 0 ? written : 1;
}
