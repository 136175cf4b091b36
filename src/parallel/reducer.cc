#include "parallel/reducer.h"

#include <c10/util/strides.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace reel::parallel {
namespace {

using Clock = std::chrono::steady_clock;

int64_t SinceEpochNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t NowNs() { return SinceEpochNs(Clock::now()); }

// Length of the union of [start, end] intervals, in seconds.
double UnionSeconds(std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0, covered_to = INT64_MIN;
  for (const auto& [start, end] : intervals) {
    const int64_t from = std::max(start, covered_to);
    if (end > from) total += end - from;
    covered_to = std::max(covered_to, end);
  }
  return total / 1e9;
}

std::string Megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MB", bytes / 1e6);
  return text;
}

}  // namespace

Result<GradCompression> ParseGradCompression(const std::string& name) {
  if (name == "none") return GradCompression::kNone;
  if (name == "fp16") return GradCompression::kFp16;
  if (name == "bf16") return GradCompression::kBf16;
  return InvalidArgumentError("gradient compression '" + name + "' is not one of none, fp16, bf16");
}

Reducer::Reducer(std::vector<NamedParameter> parameters, Comm& comm, ReducerOptions options)
    : params_(std::move(parameters)), comm_(comm), options_(options) {}

Result<std::unique_ptr<Reducer>> Reducer::Create(const std::vector<NamedParameter>& parameters,
                                                 Comm& comm, ReducerOptions options) {
  if (options.bucket_cap_bytes <= 0 || options.first_bucket_bytes <= 0) {
    return InvalidArgumentError("reducer: bucket sizes must be positive");
  }
  std::vector<NamedParameter> trainable;
  for (auto& [name, tensor] : parameters) {
    if (!tensor.requires_grad()) continue;
    if (tensor.is_sparse())
      return InvalidArgumentError("reducer: parameter '" + name + "' is sparse");
    if (tensor.scalar_type() != at::kFloat) {
      return InvalidArgumentError("reducer: parameter '" + name + "' is " +
                                  std::string(c10::toString(tensor.scalar_type())) +
                                  "; data-parallel training keeps float32 master weights");
    }
    trainable.emplace_back(name, tensor);
  }
  if (trainable.empty())
    return InvalidArgumentError("reducer: the model has no trainable parameters");
  if (options.compression == GradCompression::kBf16 && comm.backend() == "gloo" &&
      TORCH_VERSION_MAJOR < 2) {
    return InvalidArgumentError("gradient compression bf16: the Gloo of LibTorch " +
                                std::string(TORCH_VERSION) +
                                " cannot all-reduce bfloat16; use fp16 or none");
  }
  std::unique_ptr<Reducer> reducer(new Reducer(std::move(trainable), comm, options));
  const int n = static_cast<int>(reducer->params_.size());
  std::vector<int> reverse(n);
  std::iota(reverse.rbegin(), reverse.rend(), 0);
  reducer->BuildBuckets(reverse);
  reducer->ready_.assign(n, 0);
  Reducer* self = reducer.get();
  for (int i = 0; i < n; ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(reducer->params_[i].second);
    uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [self, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              self->OnGradientReady(i);
              return outputs;
            }));
    reducer->accumulators_.push_back(std::move(accumulator));
    reducer->hook_keys_.push_back(key);
  }
  return reducer;
}

Reducer::~Reducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  for (auto& b : buckets_) {
    // The backend must not write into freed buckets; a failure was already reported to the
    // caller that launched the collective, and a destructor has no one to tell.
    if (b.launched) comm_.Wait(b.collective).IgnoreError();
  }
}

void Reducer::BuildBuckets(const std::vector<int>& order) {
  buckets_.clear();
  bucket_of_.assign(params_.size(), -1);
  slot_of_.assign(params_.size(), -1);
  Bucket current;
  int64_t bytes = 0;
  auto close = [&] {
    if (current.params.empty()) return;
    const at::Tensor& first = params_[current.params[0]].second;
    current.flat = at::zeros({bytes / 4}, first.options().requires_grad(false));
    if (options_.compression == GradCompression::kNone) {
      current.wire = current.flat;
    } else {
      current.wire = at::zeros(
          {bytes / 4}, current.flat.options().dtype(options_.compression == GradCompression::kFp16
                                                        ? at::kHalf
                                                        : at::kBFloat16));
    }
    current.scale = at::scalar_tensor(1.0 / comm_.world_size(), current.flat.options());
    current.pending = static_cast<int>(current.params.size());
    current.done_ns = std::make_shared<std::atomic<int64_t>>(0);
    buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
  };
  for (int index : order) {
    const at::Tensor& p = params_[index].second;
    const int64_t size = p.numel() * 4;
    const int64_t cap = buckets_.empty() ? options_.first_bucket_bytes : options_.bucket_cap_bytes;
    const bool other_device =
        !current.params.empty() && params_[current.params[0]].second.device() != p.device();
    if (!current.params.empty() && (bytes + size > cap || other_device)) close();
    bucket_of_[index] = static_cast<int>(buckets_.size());
    slot_of_[index] = static_cast<int>(current.params.size());
    current.params.push_back(index);
    current.offsets.push_back(bytes / 4);
    bytes += size;
  }
  close();
}

std::vector<std::vector<std::string>> Reducer::BucketLayout() const {
  std::vector<std::vector<std::string>> layout;
  for (const auto& b : buckets_) {
    layout.emplace_back();
    for (int i : b.params) layout.back().push_back(params_[i].first);
  }
  return layout;
}

void Reducer::OnGradientReady(int index) {
  if (!sync_ || !hook_error_.ok()) return;
  if (ready_[index]) {
    hook_error_ = FailedPreconditionError(
        "parameter '" + params_[index].first +
        "' got a gradient twice in one synchronised step (call Finish() after "
        "each backward, or set_sync(false) for accumulation)");
    return;
  }
  ready_[index] = 1;
  if (!rebuilt_) ready_order_.push_back(index);
  Bucket& bucket = buckets_[bucket_of_[index]];
  const at::Tensor& grad = params_[index].second.grad();
  const int slot = slot_of_[index];
  at::Tensor view = bucket.flat.narrow(0, bucket.offsets[slot], grad.numel());
  // Divide while copying, as DDP does: one pass over the gradient.
  at::mul_out(view, grad.reshape({-1}), bucket.scale);
  if (--bucket.pending == 0) LaunchReadyBuckets();
}

void Reducer::LaunchReadyBuckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    if (options_.compression != GradCompression::kNone) b.wire.copy_(b.flat);
    b.started = Clock::now();
    auto started = comm_.StartAllReduce(
        b.wire, "all-reduce of gradient bucket " + std::to_string(next_launch_) + "/" +
                    std::to_string(buckets_.size()) + " (" + std::to_string(b.params.size()) +
                    " parameters, " + Megabytes(b.wire.nbytes()) + ") in step " +
                    std::to_string(step_ + 1));
    if (!started.ok()) {
      hook_error_ = started.status();
      return;
    }
    b.collective = std::move(*started);
    b.launched = true;
    b.done_ns->store(0);
    auto done = b.done_ns;
    b.collective.work->getFuture()->addCallback(
        [done](c10::ivalue::Future&) { done->store(NowNs()); });
    ++next_launch_;
  }
}

void Reducer::ResetStep() {
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = false;
  }
  next_launch_ = 0;
}

Status Reducer::Finish() {
  if (!sync_) return Status::Ok();
  const auto finish_start = Clock::now();
  Status status = hook_error_;
  if (status.ok() && next_launch_ < buckets_.size()) {
    std::string missing;
    int count = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      if (++count <= 10) missing += (missing.empty() ? "" : ", ") + params_[i].first;
    }
    status = FailedPreconditionError(
        "rank " + std::to_string(comm_.rank()) + ": " + std::to_string(count) +
        " parameters got no gradient in step " + std::to_string(step_ + 1) + ": " + missing +
        (count > 10 ? ", ..." : "") +
        " (every parameter must take part in the loss on every rank; freeze unused ones with "
        "requires_grad=false)");
  }
  for (auto& b : buckets_) {
    if (!b.launched) continue;
    Status waited = comm_.Wait(b.collective);
    if (status.ok()) status = waited;
  }
  if (!status.ok()) {
    hook_error_ = Status::Ok();
    ResetStep();
    return status;
  }
  const auto done = Clock::now();
  at::NoGradGuard no_grad;
  int64_t last_done_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> in_flight;  // each bucket's [start, end] in ns
  stats_ = ReducerStats();
  for (auto& b : buckets_) {
    if (options_.compression != GradCompression::kNone) b.flat.copy_(b.wire);
    // The averaged gradients stay in the bucket (DDP's gradient_as_bucket_view), which saves
    // copying every gradient back. `.grad` shares the bucket's storage without being an
    // autograd view, so optimisers may still detach_() and zero_() it.
    for (size_t s = 0; s < b.params.size(); ++s) {
      at::Tensor& param = params_[b.params[s]].second;
      at::Tensor grad = at::empty({0}, b.flat.options());
      grad.set_(b.flat.storage(), b.offsets[s], param.sizes(),
                c10::contiguous_strides(param.sizes()));
      param.mutable_grad() = grad;
    }
    // A completion callback may run just after the waiter wakes: then it ended by now.
    const int64_t done_ns = b.done_ns->load();
    last_done_ns = std::max(last_done_ns, done_ns);
    in_flight.emplace_back(SinceEpochNs(b.started), done_ns > 0 ? done_ns : NowNs());
    stats_.bytes += b.wire.nbytes();
  }
  stats_.busy_s = UnionSeconds(std::move(in_flight));
  stats_.buckets = static_cast<int>(buckets_.size());
  const int64_t first_start_ns = SinceEpochNs(buckets_[0].started);
  stats_.comm_s =
      std::max<int64_t>(0, (last_done_ns > 0 ? last_done_ns : NowNs()) - first_start_ns) / 1e9;
  stats_.exposed_s = std::chrono::duration<double>(done - finish_start).count();
  stats_.hidden_share =
      stats_.comm_s > 0 ? std::clamp(1.0 - stats_.exposed_s / stats_.comm_s, 0.0, 1.0) : 0.0;
  ++step_;
  ResetStep();

  if (!rebuilt_ && options_.rebuild_buckets) {
    // Every rank takes rank 0's order, so all issue the same buckets in the same sequence.
    at::Tensor order =
        at::tensor(std::vector<int64_t>(ready_order_.begin(), ready_order_.end()), at::kLong);
    REEL_RETURN_IF_ERROR(comm_.Broadcast({order}, 0, "bucket order after step 1"));
    std::vector<int> agreed(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    // Buckets start in readiness order, so the first ready gradients go first.
    BuildBuckets(agreed);
    ResetStep();
  }
  rebuilt_ = true;
  ready_order_.clear();
  return Status::Ok();
}

}  // namespace reel::parallel
