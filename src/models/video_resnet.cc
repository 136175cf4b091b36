#include "models/video_resnet.h"

#include <cmath>

#include "base/check.h"
#include "models/batch_norm.h"

namespace reel::models {
namespace {

namespace nn = torch::nn;

// Batch norm and the ReLU after it as one module in the BatchNorm3d's place; the ReLU's slot
// stays (an Identity), so every later module keeps its index and torchvision's state-dict names.
BatchNormRelu BnRelu(int features) { return BatchNormRelu(BatchNormReluOptions{features, true}); }
BatchNormRelu Bn(int features) { return BatchNormRelu(BatchNormReluOptions{features, false}); }
nn::Identity ReluDone() { return nn::Identity(); }

// A convolution without bias on oneDNN where LibTorch 1.13 would not send it there. LibTorch sends
// a CPU convolution of a single sample whose channels x T x H (x H*W for the Conv2d below) is at
// most 20480 (every convolution of a batch-1 clip at 112^2; batches of 2 or more go to oneDNN
// already) to its im2col + BLAS path, which is slower there, and OpenBLAS's threads then spin
// between calls, taking the cores a server needs for its next request. Backward is LibTorch's
// usual one (the autograd node of mkldnn_convolution calls convolution_backward). The main job's
// model at batch 1, 2 threads: 36.9-45.7 clips/s before, 51.2-64.3 after (serve_bench's raw
// forward, alternated); the same logits within torchvision's parity tolerance.
torch::Tensor ConvNoBias(const torch::Tensor& x, const torch::Tensor& weight,
                         at::IntArrayRef stride, at::IntArrayRef padding) {
  // Under CPU autocast, LibTorch's convolution casts its operands (oneDNN's op would not); the
  // dispatch key is what at::autocast's CPU switch sets, in 1.13 and in 2.x alike.
  const bool autocast = !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutocastCPU);
  const bool one_dnn = !autocast && at::hasMKLDNN() && at::globalContext().userEnabledMkldnn() &&
                       x.device().is_cpu() && x.layout() == torch::kStrided &&
                       x.scalar_type() == weight.scalar_type() &&
                       (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16);
  const std::vector<int64_t> dilation(stride.size(), 1);
  if (one_dnn) return at::mkldnn_convolution(x, weight, /*bias=*/{}, padding, stride, dilation, 1);
  return at::convolution(x, weight, /*bias=*/{}, stride, padding, dilation, false,
                         std::vector<int64_t>(stride.size(), 0), 1);
}

// A Conv3d without bias, stored exactly as torchvision's (parameter "weight", [out, in, kt, kh,
// kw]), computed by ConvNoBias.
class VideoConvImpl : public nn::Module {
 public:
  VideoConvImpl(int in, int out, std::array<int64_t, 3> kernel, std::array<int64_t, 3> stride,
                std::array<int64_t, 3> padding)
      : stride_(stride.begin(), stride.end()), padding_(padding.begin(), padding.end()) {
    weight = register_parameter("weight", torch::empty({out, in, kernel[0], kernel[1], kernel[2]}));
    nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  }
  // LibTorch modules take forward's tensor by value (AnyModule forwards it so).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  torch::Tensor forward(torch::Tensor x) { return ConvNoBias(x, weight, stride_, padding_); }
  torch::Tensor weight;

 private:
  std::vector<int64_t> stride_, padding_;
};
TORCH_MODULE(VideoConv);

VideoConv Conv(int in, int out, std::array<int64_t, 3> kernel, std::array<int64_t, 3> stride,
               std::array<int64_t, 3> padding) {
  return VideoConv(in, out, kernel, stride, padding);
}

// A Sequential with a plain forward, so it can sit inside another Sequential (torchvision's
// Conv2Plus1D is an nn.Sequential of four modules).
class Conv2Plus1DImpl : public nn::SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  // LibTorch modules take forward's tensor by value (AnyModule forwards it so).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  torch::Tensor forward(torch::Tensor x) { return SequentialImpl::forward(x); }
};
TORCH_MODULE(Conv2Plus1D);

// A (k,1,1) temporal convolution, stored exactly as torchvision's Conv3d (parameter "weight",
// [out, in, k, 1, 1]) and computed as a Conv2d over the input viewed as [B, C, T, H*W]: LibTorch
// 1.13's CPU Conv3d takes a slow path for this shape. Forward+backward, 1 thread, batch 4, the
// same results: [36, 8, 56, 56] -> 16 channels 134 ms as Conv3d against 37 ms; [11, 8, 56, 56]
// -> 16 35 against 11 ms; [288, 1, 7, 7] -> 128 5.4 against 1.2 ms; no shape measured slower.
class TemporalConvImpl : public nn::Module {
 public:
  TemporalConvImpl(int in, int out, int kernel, int stride, int padding)
      : stride_(stride), padding_(padding) {
    weight = register_parameter("weight", torch::empty({out, in, kernel, 1, 1}));
    nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  }
  // LibTorch modules take forward's tensor by value (AnyModule forwards it so).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  torch::Tensor forward(torch::Tensor x) {
    const auto b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3), w = x.size(4);
    torch::Tensor y = ConvNoBias(x.reshape({b, c, t, h * w}), weight.squeeze(-1),
                                 /*stride=*/{stride_, 1}, /*padding=*/{padding_, 0});
    return y.view({b, y.size(1), y.size(2), h, w});
  }
  torch::Tensor weight;

 private:
  int64_t stride_, padding_;
};
TORCH_MODULE(TemporalConv);

// One 3x3x3 convolution as each architecture builds it (torchvision's conv_builder classes).
nn::AnyModule ConvBuilder(VideoArch arch, bool temporal, int in, int out, int mid, int stride) {
  const int64_t s = stride;
  if (arch == VideoArch::kR2Plus1D) {  // Conv2Plus1D: spatial (1,3,3), then temporal (3,1,1)
    Conv2Plus1D seq(Conv(in, mid, {1, 3, 3}, {1, s, s}, {0, 1, 1}), BnRelu(mid), ReluDone(),
                    TemporalConv(mid, out, 3, stride, 1));
    return nn::AnyModule(seq);
  }
  if (!temporal)
    return nn::AnyModule(Conv(in, out, {1, 3, 3}, {1, s, s}, {0, 1, 1}));  // NoTemporal
  return nn::AnyModule(Conv(in, out, {3, 3, 3}, {s, s, s}, {1, 1, 1}));    // Simple
}

class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(VideoArch arch, bool temporal, int inplanes, int planes, int stride) {
    const int mid = (inplanes * planes * 27) / (inplanes * 9 + 3 * planes);
    nn::Sequential c1;
    c1->push_back(ConvBuilder(arch, temporal, inplanes, planes, mid, stride));
    c1->push_back(BnRelu(planes));
    c1->push_back(ReluDone());
    conv1 = register_module("conv1", c1);
    nn::Sequential c2;
    c2->push_back(ConvBuilder(arch, temporal, planes, planes, mid, 1));
    c2->push_back(Bn(planes));
    conv2 = register_module("conv2", c2);
    if (stride != 1 || inplanes != planes) {
      const int64_t s = stride;
      std::array<int64_t, 3> ds = (arch == VideoArch::kMC3 && !temporal)
                                      ? std::array<int64_t, 3>{1, s, s}
                                      : std::array<int64_t, 3>{s, s, s};
      downsample = register_module(
          "downsample",
          nn::Sequential(Conv(inplanes, planes, {1, 1, 1}, ds, {0, 0, 0}), Bn(planes)));
    }
  }

  // LibTorch modules take forward's tensor by value (AnyModule forwards it so).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = conv2->forward(conv1->forward(x));
    out += downsample ? downsample->forward(x) : x;
    return torch::relu_(out);
  }

 private:
  nn::Sequential conv1{nullptr}, conv2{nullptr}, downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

}  // namespace

VideoResNetImpl::VideoResNetImpl(const VideoResNetOptions& o) : options_(o) {
  const int w = o.width;
  if (o.arch == VideoArch::kR2Plus1D) {
    const int mid = std::max(1, (45 * w + 32) / 64);  // 45 at width 64, as torchvision
    stem = register_module(
        "stem", nn::Sequential(Conv(3, mid, {1, 7, 7}, {1, 2, 2}, {0, 3, 3}), BnRelu(mid),
                               ReluDone(), TemporalConv(mid, w, 3, 1, 1), BnRelu(w), ReluDone()));
  } else {
    stem = register_module(
        "stem", nn::Sequential(Conv(3, w, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}), BnRelu(w), ReluDone()));
  }
  int inplanes = w;
  auto make_layer = [&](int index, int planes, int blocks, int stride) {
    // MC3 keeps full 3D convolutions in the first stage only.
    const bool temporal = o.arch != VideoArch::kMC3 || index == 1;
    nn::Sequential layer;
    for (int b = 0; b < blocks; ++b) {
      layer->push_back(BasicBlock(o.arch, temporal, inplanes, planes, b == 0 ? stride : 1));
      inplanes = planes;
    }
    return register_module("layer" + std::to_string(index), layer);
  };
  REEL_CHECK(o.head_stage >= 1 && o.head_stage <= 4) << "head_stage " << o.head_stage;
  layer1 = make_layer(1, w, o.layers[0], 1);
  if (o.head_stage >= 2) layer2 = make_layer(2, 2 * w, o.layers[1], 2);
  if (o.head_stage >= 3) layer3 = make_layer(3, 4 * w, o.layers[2], 2);
  if (o.head_stage >= 4) layer4 = make_layer(4, 8 * w, o.layers[3], 2);
  avgpool =
      register_module("avgpool", nn::AdaptiveAvgPool3d(nn::AdaptiveAvgPool3dOptions({1, 1, 1})));
  fc = Classifier(*this, w << (o.head_stage - 1), o.hidden, o.num_classes);
  units_.push_back({"stem", 0, 0});
  const nn::Sequential* built[] = {&layer1, &layer2, &layer3, &layer4};
  for (int l = 1; l <= o.head_stage; ++l) {
    for (size_t b = 0; b < (*built[l - 1])->size(); ++b) {
      units_.push_back({"layer" + std::to_string(l) + "." + std::to_string(b), l, b});
    }
  }
  units_.push_back({"head", 5, 0});
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): LibTorch modules take tensors by value
torch::Tensor VideoResNetImpl::RunUnit(const Unit& unit, torch::Tensor x) {
  nn::Sequential* layers[] = {&layer1, &layer2, &layer3, &layer4};
  if (unit.layer == 0) return stem->forward(x);
  if (unit.layer == 5) return fc(avgpool->forward(x).flatten(1));
  return ((*layers[unit.layer - 1])->begin() + static_cast<std::ptrdiff_t>(unit.block))->forward(x);
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): LibTorch modules take tensors by value
torch::Tensor VideoResNetImpl::forward_units(torch::Tensor x, int begin, int end) {
  REEL_CHECK(begin >= 0 && begin <= end && end <= unit_count()) << begin << ".." << end;
  for (int u = begin; u < end; ++u) x = RunUnit(units_[u], std::move(x));
  return x;
}

std::vector<torch::Tensor> VideoResNetImpl::UnitParameters(int unit) const {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters()) {
    if (UnitOwns(unit, p.key())) out.push_back(p.value());
  }
  return out;
}

bool VideoResNetImpl::UnitOwns(int unit, const std::string& name) const {
  const std::string& u = units_.at(unit).name;
  if (u == "head") return name.rfind("fc.", 0) == 0 || name.rfind("avgpool.", 0) == 0;
  return name.rfind(u + ".", 0) == 0;
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): LibTorch modules take tensors by value
torch::Tensor VideoResNetImpl::features(torch::Tensor x, int stage) {
  REEL_CHECK(stage >= 1 && stage <= options_.head_stage) << "stage " << stage;
  nn::Sequential* stages[] = {&layer1, &layer2, &layer3, &layer4};
  x = stem->forward(x);
  for (int s = 0; s < stage; ++s) x = (*stages[s])->forward(x);
  return avgpool->forward(x).flatten(1);
}

torch::Tensor VideoResNetImpl::forward(torch::Tensor x) {
  return fc(features(std::move(x), options_.head_stage));
}

}  // namespace reel::models
