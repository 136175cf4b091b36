#include "parallel/pipeline.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

namespace reel::parallel {
namespace {

constexpr int kMaxDims = 8;
constexpr int64_t kHeaderLength = kMaxDims + 2;  // dimension count, sizes, dtype

enum Direction { kForward = 0, kBackward = 1 };
enum Part { kHeader = 0, kData = 1 };

int Tag(int micro, Direction direction, Part part) { return (micro * 2 + direction) * 2 + part; }
// Above every micro-batch's tags (micro-batches are far fewer than 2^28).
constexpr int kTargetsTag = 1 << 30;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<UnitCost> ProfileUnits(const std::vector<std::string>& names,
                                   const UnitForward& forward, const UnitParameters& parameters,
                                   const at::Tensor& micro_batch, int repeats) {
  std::vector<UnitCost> costs;
  at::Tensor x = micro_batch;
  for (int u = 0; u < static_cast<int>(names.size()); ++u) {
    UnitCost c;
    c.name = names[u];
    for (const at::Tensor& p : parameters(u)) c.parameter_bytes += p.numel() * p.element_size();
    at::Tensor output;
    c.seconds = std::numeric_limits<double>::infinity();
    for (int r = 0; r <= repeats; ++r) {  // run 0 warms up
      const at::Tensor input = u == 0 ? x : x.detach().requires_grad_(true);
      const auto start = std::chrono::steady_clock::now();
      output = forward(u, input);
      output.backward(at::ones_like(output));
      if (r > 0) c.seconds = std::min(c.seconds, SecondsSince(start));
    }
    for (const at::Tensor& p : parameters(u)) {
      if (p.grad().defined()) p.mutable_grad() = at::Tensor();  // profiling leaves no gradient
    }
    c.activation_bytes = output.numel() * output.element_size();
    costs.push_back(c);
    x = output.detach();
  }
  return costs;
}

Result<PipelineSchedule> ParsePipelineSchedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  return InvalidArgumentError("pipeline schedule must be gpipe or 1f1b, got '" + name + "'");
}

Result<PipelineStage> PipelineStage::Make(Comm* comm, PipelineOptions options, StageForward forward,
                                          StageLoss loss) {
  if (comm == nullptr || !forward) return InvalidArgumentError("a pipeline stage needs a forward");
  if (options.micro_batches < 1) {
    return InvalidArgumentError("micro_batches must be at least 1, got " +
                                std::to_string(options.micro_batches));
  }
  if (comm->rank() == comm->world_size() - 1 && !loss) {
    return InvalidArgumentError("the last pipeline stage needs the loss");
  }
  return PipelineStage(comm, options, std::move(forward), std::move(loss));
}

Status PipelineStage::SendTensor(const at::Tensor& t, int peer, int tag, const std::string& what) {
  if (t.dim() > kMaxDims) {
    return InvalidArgumentError(what + " has " + std::to_string(t.dim()) +
                                " dimensions; a pipeline message carries at most " +
                                std::to_string(kMaxDims));
  }
  at::Tensor header = at::zeros({kHeaderLength}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) h[1 + d] = t.size(d);
  h[kMaxDims + 1] = static_cast<int64_t>(t.scalar_type());
  at::Tensor data = t.contiguous();
  for (auto [tensor, part] : {std::pair{header, kHeader}, std::pair{data, kData}}) {
    REEL_ASSIGN_OR_RETURN(PendingCollective p, comm_->StartSend(tensor, peer, tag + part, what));
    sends_.push_back(std::move(p));
    send_buffers_.push_back(tensor);
  }
  return Status::Ok();
}

Result<at::Tensor> PipelineStage::RecvTensor(int peer, int tag, const std::string& what) {
  at::Tensor header = at::empty({kHeaderLength}, at::kLong);
  REEL_ASSIGN_OR_RETURN(PendingCollective h, comm_->StartRecv(header, peer, tag + kHeader, what));
  REEL_RETURN_IF_ERROR(comm_->Wait(h));
  auto a = header.accessor<int64_t, 1>();
  if (a[0] < 0 || a[0] > kMaxDims) {
    return DataLossError("rank " + std::to_string(stage()) + ": " + what + " from rank " +
                         std::to_string(peer) + " has a malformed header");
  }
  std::vector<int64_t> sizes(a.data() + 1, a.data() + 1 + a[0]);
  at::Tensor data =
      at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(a[kMaxDims + 1])));
  REEL_ASSIGN_OR_RETURN(PendingCollective d, comm_->StartRecv(data, peer, tag + kData, what));
  REEL_RETURN_IF_ERROR(comm_->Wait(d));
  return data;
}

Status PipelineStage::FinishSends() {
  Status status = Status::Ok();
  for (PendingCollective& p : sends_) {
    Status waited = comm_->Wait(p);
    if (status.ok()) status = waited;
  }
  sends_.clear();
  send_buffers_.clear();
  return status;
}

Status PipelineStage::Forward(int micro, const std::vector<at::Tensor>& inputs,
                              const std::vector<at::Tensor>& targets, double weight, InFlight* f,
                              double* loss_sum) {
  const std::string what = "activations of micro-batch " + std::to_string(micro);
  if (first()) {
    f->input = inputs[micro];
  } else {
    REEL_ASSIGN_OR_RETURN(f->input, RecvTensor(stage() - 1, Tag(micro, kForward, kHeader), what));
    f->input.requires_grad_(true);
  }
  const auto start = std::chrono::steady_clock::now();
  f->output = forward_(f->input);
  if (last()) {
    f->loss = loss_(f->output, targets[micro]) * weight;
    *loss_sum += f->loss.item<double>();
  }
  busy_seconds_ += SecondsSince(start);
  if (last()) return Status::Ok();
  return SendTensor(f->output.detach(), stage() + 1, Tag(micro, kForward, kHeader), what);
}

Status PipelineStage::Backward(int micro, InFlight* f) {
  const std::string what = "gradients of micro-batch " + std::to_string(micro);
  at::Tensor grad;
  if (!last()) {
    REEL_ASSIGN_OR_RETURN(grad, RecvTensor(stage() + 1, Tag(micro, kBackward, kHeader), what));
  }
  const auto start = std::chrono::steady_clock::now();
  if (last()) {
    f->loss.backward();
  } else {
    f->output.backward(grad);
  }
  busy_seconds_ += SecondsSince(start);
  Status sent = Status::Ok();
  if (!first())
    sent = SendTensor(f->input.grad(), stage() - 1, Tag(micro, kBackward, kHeader), what);
  *f = InFlight{};  // its activations are freed here
  return sent;
}

Result<at::Tensor> PipelineStage::ShareTargets(const at::Tensor& targets) {
  if (stages() == 1) return targets;
  if (first()) {
    if (!targets.defined()) return InvalidArgumentError("the first pipeline stage needs targets");
    REEL_RETURN_IF_ERROR(SendTensor(targets, stages() - 1, kTargetsTag, "the batch's targets"));
    return at::Tensor();
  }
  if (!last()) return at::Tensor();
  return RecvTensor(0, kTargetsTag, "the batch's targets");
}

Result<PipelineStepResult> PipelineStage::Step(const at::Tensor& batch, const at::Tensor& targets) {
  const int m = o_.micro_batches;
  std::vector<at::Tensor> inputs, target_parts;
  if (first()) inputs = batch.tensor_split(m, 0);
  double total = 0;
  if (last()) {
    if (targets.size(0) < m) {
      return InvalidArgumentError("a batch of " + std::to_string(targets.size(0)) +
                                  " cannot be split into " + std::to_string(m) + " micro-batches");
    }
    target_parts = targets.tensor_split(m, 0);
    total = static_cast<double>(targets.size(0));
  }
  const auto start = std::chrono::steady_clock::now();
  busy_seconds_ = 0;
  std::vector<InFlight> flight(static_cast<size_t>(m));
  PipelineStepResult r;
  int in_flight = 0;
  auto forward = [&](int i) -> Status {
    const double weight = last() ? target_parts[i].size(0) / total : 0;
    REEL_RETURN_IF_ERROR(Forward(i, inputs, target_parts, weight, &flight[i], &r.loss));
    r.max_in_flight = std::max(r.max_in_flight, ++in_flight);
    return Status::Ok();
  };
  auto backward = [&](int i) -> Status {
    --in_flight;
    return Backward(i, &flight[i]);
  };
  auto schedule = [&]() -> Status {
    if (o_.schedule == PipelineSchedule::kGPipe) {
      for (int i = 0; i < m; ++i) REEL_RETURN_IF_ERROR(forward(i));
      for (int i = m - 1; i >= 0; --i) REEL_RETURN_IF_ERROR(backward(i));
      return Status::Ok();
    }
    const int warmup = std::min(stages() - stage() - 1, m);
    for (int i = 0; i < warmup; ++i) REEL_RETURN_IF_ERROR(forward(i));
    for (int i = warmup; i < m; ++i) {
      REEL_RETURN_IF_ERROR(forward(i));
      REEL_RETURN_IF_ERROR(backward(i - warmup));
    }
    for (int i = m - warmup; i < m; ++i) REEL_RETURN_IF_ERROR(backward(i));
    return Status::Ok();
  };
  const Status ran = schedule();
  const Status sent = FinishSends();  // even after a failure: no send outlives its step
  REEL_RETURN_IF_ERROR(ran);
  REEL_RETURN_IF_ERROR(sent);
  r.busy_seconds = busy_seconds_;
  r.step_seconds = SecondsSince(start);
  return r;
}

}  // namespace reel::parallel
