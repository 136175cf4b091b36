#include "bench/op_profile.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace reel::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Totals {
  std::mutex mu;
  std::map<std::string, OpStats> by_name;
};
Totals& totals() {
  static Totals t;
  return t;
}

// An operator in progress on this thread: when it began and the time its callees took.
struct Frame : at::ObserverContext {
  Clock::time_point start = Clock::now();
  double children = 0;
  double flops = 0;  // from the inputs, which only the start callback may read
};
thread_local std::vector<Frame*> stack;

std::vector<int64_t> Sizes(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor().sizes().vec() : std::vector<int64_t>{};
}

std::vector<int64_t> Ints(const c10::IValue& v) {
  return v.isIntList() ? v.toIntVector() : std::vector<int64_t>{};
}

int64_t Product(const std::vector<int64_t>& v, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// Output positions of a convolution of `input` by `weight` (N, C, spatial...), from its stride,
// padding and dilation: out = (in + 2 pad - dilation (k - 1) - 1) / stride + 1 per dimension.
int64_t ConvOutputPositions(const std::vector<int64_t>& input, const std::vector<int64_t>& weight,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                            const std::vector<int64_t>& dilation) {
  int64_t positions = input.empty() ? 0 : input[0];
  for (size_t d = 2; d < input.size() && d < weight.size(); ++d) {
    const size_t i = d - 2;
    const int64_t s = i < stride.size() ? stride[i] : 1, p = i < pad.size() ? pad[i] : 0;
    const int64_t dl = i < dilation.size() ? dilation[i] : 1;
    positions *= (input[d] + 2 * p - dl * (weight[d] - 1) - 1) / s + 1;
  }
  return positions;
}

// A convolution's FLOPs, 2 x outputs x Cout x Cin/g x kernel, from its input (0), weight (1),
// stride and padding (at `stride` and `pad`) and dilation (5).
double ConvFlops(c10::ArrayRef<const c10::IValue> in, size_t stride, size_t pad) {
  const auto weight = Sizes(in[1]);
  if (weight.size() < 3) return 0;
  const int64_t outputs =
      ConvOutputPositions(Sizes(in[0]), weight, Ints(in[stride]), Ints(in[pad]), Ints(in[5]));
  return 2.0 * static_cast<double>(outputs) * static_cast<double>(weight[0] * Product(weight, 1));
}

// The FLOPs of one call, for the operators that do the arithmetic; 0 for the rest.
double Flops(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  const auto in = fn.inputs();
  // (input, weight, bias, stride, padding, dilation, ...).
  if (name == "aten::convolution" && in.size() >= 6) return ConvFlops(in, 3, 4);
  // (input, weight, bias, padding, stride, dilation, groups): called directly by Reel's models.
  if (name == "aten::mkldnn_convolution" && in.size() >= 6) return ConvFlops(in, 4, 3);
  if (name == "aten::convolution_backward" && in.size() >= 11) {
    // (grad_output, input, weight, ..., output_mask): a forward's worth per gradient computed.
    const auto grad = Sizes(in[0]), weight = Sizes(in[2]);
    if (grad.size() < 3 || weight.size() < 3) return 0;
    const double one = 2.0 * static_cast<double>(Product(grad, 0) / grad[1]) *
                       static_cast<double>(weight[0] * Product(weight, 1));
    // output_mask's first two: the gradients of the input and of the weight. Boxed as a list
    // whose elements are not always bools; an element that says nothing counts as wanted.
    int wanted = 0;
    if (in[10].isList()) {
      const auto mask = in[10].toListRef();
      for (size_t i = 0; i < mask.size() && i < 2; ++i) {
        const c10::IValue& e = mask[i];
        wanted += e.isBool() ? (e.toBool() ? 1 : 0) : e.isInt() ? (e.toInt() != 0 ? 1 : 0) : 1;
      }
    } else {
      wanted = 2;
    }
    return one * wanted;
  }
  if ((name == "aten::mm" && in.size() >= 2) || (name == "aten::addmm" && in.size() >= 3)) {
    const auto a = Sizes(in[name == "aten::mm" ? 0 : 1]), b = Sizes(in[name == "aten::mm" ? 1 : 2]);
    if (a.size() != 2 || b.size() != 2) return 0;
    return 2.0 * static_cast<double>(a[0] * a[1] * b[1]);
  }
  return 0;
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  auto frame = std::make_unique<Frame>();
  // An operator called by one already counted (aten::convolution calls the backend's) is not
  // counted again.
  const bool counted =
      std::any_of(stack.begin(), stack.end(), [](Frame* f) { return f->flops > 0; });
  frame->flops = counted ? 0 : Flops(fn);
  frame->start = Clock::now();
  stack.push_back(frame.get());
  return frame;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  auto* frame = static_cast<Frame*>(context);
  const double total = std::chrono::duration<double>(Clock::now() - frame->start).count();
  if (!stack.empty() && stack.back() == frame) stack.pop_back();
  if (!stack.empty()) stack.back()->children += total;
  std::lock_guard lock(totals().mu);
  OpStats& s = totals().by_name[fn.name()];
  s.name = fn.name();
  ++s.calls;
  s.self_seconds += std::max(0.0, total - frame->children);
  s.seconds += total;
  s.flops += frame->flops;
}

}  // namespace

OpProfile::OpProfile() {
  {
    std::lock_guard lock(totals().mu);
    totals().by_name.clear();
  }
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(OnStart, OnEnd)
          .needsInputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

OpProfile::~OpProfile() {
  if (!finished_) Finish();
}

std::vector<OpStats> OpProfile::Finish() {
  if (!finished_) at::removeCallback(handle_);
  finished_ = true;
  std::vector<OpStats> out;
  std::lock_guard lock(totals().mu);
  for (auto& [name, stats] : totals().by_name) out.push_back(stats);
  std::sort(out.begin(), out.end(),
            [](const OpStats& a, const OpStats& b) { return a.self_seconds > b.self_seconds; });
  return out;
}

double TotalFlops(const std::vector<OpStats>& ops) {
  double total = 0;
  for (const OpStats& op : ops) total += op.flops;
  return total;
}

}  // namespace reel::bench
