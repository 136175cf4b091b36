// Data-parallel gradient reduction, Reel's counterpart of the reducer inside PyTorch's
// DistributedDataParallel (whose C++ reducer is not usable from Debian's LibTorch headers).
//
// Parameters are grouped into buckets (a small first bucket, then `bucket_cap_bytes` each), in
// reverse registration order at first and, after the first synchronised step, in the order
// their gradients became ready on rank 0 (broadcast so every rank agrees). A hook on each
// parameter's gradient accumulator copies its gradient, divided by the world size, into its
// bucket as soon as autograd has accumulated it; when a bucket is complete, its all-reduce starts
// asynchronously (buckets always start in bucket order, so every rank issues the same sequence)
// while backward goes on computing the other gradients. Finish() waits for the buckets and
// makes each `.grad` share its bucket's memory (DDP's gradient_as_bucket_view: no copy back);
// the next backward may accumulate into it or start from none, either works.
//
// Gradient compression: fp16 (or bf16 where the backend reduces it) on the wire, fp32 in `.grad`.
// No sync: set_sync(false) for the micro-batches of gradient accumulation that should only
// accumulate locally (DDP's no_sync()); the synchronised micro-batch reduces the sum.
//
// Usage per step: set_sync(last_micro_batch); backward(); after the last micro-batch Finish().
//
// Errors: Create: InvalidArgument (no parameters, sparse or non-float parameters, bad bucket
// sizes, a compression the backend cannot reduce). Finish: FailedPrecondition naming the
// parameters that got no gradient this step, or a parameter that got two; the collectives'
// errors (Unavailable with the watchdog's report).
// Ownership and thread-safety: the reducer keeps the parameters' gradient accumulators alive and
// removes its hooks when destroyed; the model must outlive it. Hooks run on autograd's thread;
// set_sync and Finish belong to the training loop's thread, between backward passes.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "parallel/comm.h"

namespace torch::autograd {
struct Node;
}

namespace reel::parallel {

enum class GradCompression { kNone, kFp16, kBf16 };
Result<GradCompression> ParseGradCompression(const std::string& name);  // none|fp16|bf16

struct ReducerOptions {
  int64_t bucket_cap_bytes = 25 << 20;
  int64_t first_bucket_bytes = 1 << 20;
  GradCompression compression = GradCompression::kNone;
  bool rebuild_buckets = true;  // reorder buckets after the first step by gradient readiness
};

// Figures of the last synchronised step.
struct ReducerStats {
  int buckets = 0;
  int64_t bytes = 0;        // on the wire
  double comm_s = 0;        // first bucket's start to last bucket's end
  double busy_s = 0;        // time with at least one bucket in flight: bytes / busy_s is the
                            // bandwidth the all-reduces got, without waits for gradients
  double exposed_s = 0;     // Finish's wait: communication not hidden behind backward
  double hidden_share = 0;  // 1 - exposed / comm
};

class Reducer {
 public:
  using NamedParameter = std::pair<std::string, at::Tensor>;
  static Result<std::unique_ptr<Reducer>> Create(const std::vector<NamedParameter>& parameters,
                                                 Comm& comm, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  Status Finish();

  ReducerStats stats() const { return stats_; }
  // Parameter names per bucket, in launch order.
  std::vector<std::vector<std::string>> BucketLayout() const;

 private:
  struct Bucket {
    std::vector<int> params;
    std::vector<int64_t> offsets;
    at::Tensor flat;   // fp32 gradients
    at::Tensor wire;   // what is all-reduced: `flat`, or its compressed copy
    at::Tensor scale;  // 1 / world size, on the bucket's device
    int pending = 0;
    bool launched = false;
    PendingCollective collective;
    std::chrono::steady_clock::time_point started;
    std::shared_ptr<std::atomic<int64_t>> done_ns;  // set by the work's completion callback
  };

  Reducer(std::vector<NamedParameter> parameters, Comm& comm, ReducerOptions options);
  void BuildBuckets(const std::vector<int>& order);
  void OnGradientReady(int index);
  void LaunchReadyBuckets();
  void ResetStep();

  std::vector<NamedParameter> params_;
  Comm& comm_;
  ReducerOptions options_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<int> slot_of_;  // index within its bucket
  std::vector<char> ready_;
  std::vector<int> ready_order_;
  size_t next_launch_ = 0;
  bool sync_ = true;
  bool rebuilt_ = false;
  int64_t step_ = 0;
  Status hook_error_;
  ReducerStats stats_;
};

}  // namespace reel::parallel
