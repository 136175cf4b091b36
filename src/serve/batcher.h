// Dynamic batching for one model version (as Triton's dynamic batcher): requests queue, and each
// free model instance takes as many whole requests from the front as fit into one forward pass.
//
// When a batch leaves:
//   - at once when the queued samples reach max_batch (or the largest preferred batch size), or
//     when the next request would not fit;
//   - otherwise when the oldest request has waited max_delay: the largest front part whose size
//     is a preferred batch size, or all that fits when none is;
//   - max_delay 0: at once with whatever is queued (requests still gather while every instance
//     is busy, which is where batching pays on a saturated CPU).
// A request past its deadline is answered DeadlineExceeded, and one whose client went away
// Cancelled, both before any compute is spent on it. A full queue answers ResourceExhausted at
// once (the server's 503 with Retry-After).
//
// Time comes from a Clock, so tests decide with a FakeClock which requests are late.
//
// Thread-safety: Run and stats may be called from any number of threads; Shutdown once, not from
// the forward function. Run blocks its caller until its request is answered.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace reel::serve {

struct BatcherOptions {
  int max_batch = 8;                       // samples in one forward pass
  std::chrono::microseconds max_delay{0};  // how long a request may wait for company
  std::vector<int> preferred_batch_sizes;  // each in [1, max_batch]
  int instances = 1;                       // forward passes that may run at once
  int max_queue = 256;                     // waiting requests; one more is ResourceExhausted

  // InvalidArgument naming the bad field.
  Status Validate() const;
};

// One forward pass on instance `instance`: `n` samples of sample_size floats each, one after the
// other in `input`; returns n × output_size floats.
using ForwardFn =
    std::function<Result<std::vector<float>>(int instance, const float* input, int64_t n)>;

struct BatchWork {
  // n × sample_size floats: `input`, or when that is empty, the bytes of `input_bytes` (a
  // request's FP32 tensor as it was parsed, taken rather than copied: a copy of a 1.2 MB clip
  // into new memory cost as much as a fifth of the server's own work on it).
  std::vector<float> input;
  std::string input_bytes;
  int64_t n = 1;  // samples, 1..max_batch
  std::optional<Clock::TimePoint> deadline;
  std::function<bool()> cancelled;  // the client went away (may be empty)

  // The floats, wherever they are.
  const float* data() const {
    return input.empty() ? reinterpret_cast<const float*>(input_bytes.data()) : input.data();
  }
  size_t size() const { return input.empty() ? input_bytes.size() / sizeof(float) : input.size(); }
};

struct BatchResult {
  std::vector<float> output;  // n × output_size floats
  Clock::Duration queue_time{};
  Clock::Duration compute_time{};
  int64_t batch_size = 0;  // samples in the forward pass this request rode in
};

struct BatcherStats {
  int64_t queued = 0;     // requests waiting now
  int64_t in_flight = 0;  // requests in a forward pass now
  int64_t succeeded = 0, failed = 0, rejected = 0, expired = 0, cancelled = 0;
  int64_t batches = 0, samples = 0;
  Clock::Duration queue_time{}, compute_time{};  // sums over succeeded requests / batches
  std::map<int64_t, int64_t> batch_sizes;        // samples in a forward pass -> passes
};

// Which front part of the queue a free instance takes now, or until when it waits. `sizes` are
// the queued requests' sample counts, oldest first; `oldest` when the first was queued. Pure.
struct BatchPlan {
  size_t requests = 0;                         // take this many from the front (0: none yet)
  std::optional<Clock::TimePoint> wait_until;  // when nothing is taken: wake then (or on news)
};
BatchPlan PlanBatch(const std::vector<int64_t>& sizes, Clock::TimePoint oldest,
                    Clock::TimePoint now, const BatcherOptions& options);

class Batcher {
 public:
  // Starts options.instances threads. InvalidArgument for bad options or sizes.
  static Result<std::unique_ptr<Batcher>> Start(BatcherOptions options, int64_t sample_size,
                                                int64_t output_size, ForwardFn forward,
                                                Clock* clock = Clock::System());
  ~Batcher();  // Shutdown()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `work` and waits for its answer. Errors: InvalidArgument for a wrong size,
  // ResourceExhausted when the queue is full, DeadlineExceeded, Cancelled, Unavailable after
  // Shutdown began, and the forward function's error (for every request of that batch).
  Result<BatchResult> Run(BatchWork work);

  // Queues `work` and returns at once; the future gives what Run would have returned (errors
  // found before queueing come back ready). The caller may go on working while it is computed.
  std::future<Result<BatchResult>> Submit(BatchWork work);

  // Wakes the instances to look at the queue again (after a FakeClock moved, in tests).
  void Poke();

  BatcherStats stats() const;
  const BatcherOptions& options() const;

  // Refuses new work, answers everything queued (it is still computed), joins the threads.
  void Shutdown();

 private:
  struct Impl;
  explicit Batcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::serve
