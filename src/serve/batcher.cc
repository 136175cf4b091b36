#include "serve/batcher.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "base/allocator.h"
#include "base/check.h"

namespace reel::serve {
namespace {

struct Pending {
  BatchWork work;
  Clock::TimePoint queued_at;
  std::promise<Result<BatchResult>> answer;
};
using Batch = std::vector<std::unique_ptr<Pending>>;

// The largest k <= fit whose first k requests hold a preferred number of samples; 0 if none.
size_t LargestPreferredPrefix(const std::vector<int64_t>& sizes, size_t fit,
                              const std::vector<int>& preferred) {
  size_t best = 0;
  int64_t total = 0;
  for (size_t k = 1; k <= fit; ++k) {
    total += sizes[k - 1];
    if (std::find(preferred.begin(), preferred.end(), total) != preferred.end()) best = k;
  }
  return best;
}

// Takes `fit` requests, or the largest preferred front part of them when there is one.
size_t PreferredOrAll(const std::vector<int64_t>& sizes, size_t fit,
                      const std::vector<int>& preferred) {
  const size_t k = LargestPreferredPrefix(sizes, fit, preferred);
  return k > 0 ? k : fit;
}

}  // namespace

Status BatcherOptions::Validate() const {
  if (max_batch < 1) return InvalidArgumentError("max batch must be at least 1");
  if (max_delay.count() < 0) return InvalidArgumentError("max delay must not be negative");
  if (instances < 1) return InvalidArgumentError("instances must be at least 1");
  if (max_queue < 1) return InvalidArgumentError("the queue must hold at least 1 request");
  for (int size : preferred_batch_sizes) {
    if (size < 1 || size > max_batch) {
      return InvalidArgumentError("preferred batch size " + std::to_string(size) +
                                  " is outside [1, max batch " + std::to_string(max_batch) + "]");
    }
  }
  return Status::Ok();
}

BatchPlan PlanBatch(const std::vector<int64_t>& sizes, Clock::TimePoint oldest,
                    Clock::TimePoint now, const BatcherOptions& options) {
  if (sizes.empty()) return {};
  const std::vector<int>& preferred = options.preferred_batch_sizes;
  const int64_t target =
      preferred.empty() ? options.max_batch : *std::max_element(preferred.begin(), preferred.end());
  size_t fit = 0;
  int64_t total = 0;
  while (fit < sizes.size() && total + sizes[fit] <= options.max_batch) total += sizes[fit++];
  if (fit == 0) return {1, std::nullopt};  // Run refuses such requests; never stall on one
  const bool full = total >= target || fit < sizes.size();
  if (full || options.max_delay.count() == 0 || now >= oldest + options.max_delay) {
    return {PreferredOrAll(sizes, fit, preferred), std::nullopt};
  }
  return {0, oldest + options.max_delay};
}

struct Batcher::Impl {
  BatcherOptions options;
  int64_t sample_size = 0, output_size = 0;
  ForwardFn forward;
  Clock* clock = nullptr;

  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<std::unique_ptr<Pending>> queue;  // guarded by mu
  bool stopping = false;                       // guarded by mu
  BatcherStats stats;                          // guarded by mu
  std::vector<std::thread> threads;
  // Each instance's batch, joined from its requests: kept from one batch to the next, so that a
  // batch of 8 clips (9.6 MB) is not faulted into new memory every time.
  std::vector<UninitializedVector<float>> joined;

  void Loop(int instance) {
    for (;;) {
      Batch batch = TakeBatch();
      if (batch.empty()) return;
      Execute(instance, std::move(batch));
    }
  }

  // Answers, under mu, the queued requests that are late or whose client left.
  void DropDead(Clock::TimePoint now) {
    for (auto it = queue.begin(); it != queue.end();) {
      Pending& p = **it;
      Status why;
      if (p.work.deadline && now >= *p.work.deadline) {
        why = DeadlineExceededError("the request's timeout passed while it waited in the queue");
        ++stats.expired;
      } else if (p.work.cancelled && p.work.cancelled()) {
        why = CancelledError("the client went away before the request was computed");
        ++stats.cancelled;
      }
      if (why.ok()) {
        ++it;
        continue;
      }
      p.answer.set_value(why);
      it = queue.erase(it);
    }
  }

  // Shutting down, nothing waits for company.
  BatcherOptions Draining() const {
    BatcherOptions drain = options;
    drain.max_delay = std::chrono::microseconds(0);
    return drain;
  }

  // Blocks until a batch is due; empty when stopping with nothing queued.
  Batch TakeBatch() {
    std::unique_lock lock(mu);
    for (;;) {
      const Clock::TimePoint now = clock->Now();
      DropDead(now);
      if (queue.empty()) {
        if (stopping) return {};
        wake.wait(lock);
        continue;
      }
      std::vector<int64_t> sizes;
      sizes.reserve(queue.size());
      for (const auto& p : queue) sizes.push_back(p->work.n);
      BatchPlan plan = PlanBatch(sizes, queue.front()->queued_at, now, options);
      if (plan.requests == 0 && stopping) plan = PlanBatch(sizes, now, now, Draining());
      if (plan.requests > 0) return PopFront(plan.requests);
      wake.wait_for(lock, *plan.wait_until - now);
    }
  }

  Batch PopFront(size_t count) {
    Batch batch;
    for (size_t i = 0; i < count; ++i) {
      batch.push_back(std::move(queue.front()));
      queue.pop_front();
      stats.in_flight += 1;
    }
    if (!queue.empty()) wake.notify_one();  // another free instance may take the rest
    return batch;
  }

  void Execute(int instance, Batch batch) {
    int64_t n = 0;
    for (const auto& p : batch) n += p->work.n;
    const float* input = batch[0]->work.data();
    if (batch.size() > 1) {
      auto& buffer = joined[static_cast<size_t>(instance)];
      buffer.resize(static_cast<size_t>(n * sample_size));
      float* at = buffer.data();
      for (const auto& p : batch) at = std::copy_n(p->work.data(), p->work.size(), at);
      input = buffer.data();
    }
    const Clock::TimePoint start = clock->Now();
    Result<std::vector<float>> output = forward(instance, input, n);
    const Clock::TimePoint end = clock->Now();
    if (output.ok() && output->size() != static_cast<size_t>(n * output_size)) {
      output =
          InternalError("the model returned " + std::to_string(output->size()) + " values for " +
                        std::to_string(n) + " samples of " + std::to_string(output_size));
    }
    Answer(std::move(batch), std::move(output), start, end, n);
  }

  void Answer(Batch batch, Result<std::vector<float>> output, Clock::TimePoint start,
              Clock::TimePoint end, int64_t n) {
    std::lock_guard lock(mu);
    stats.in_flight -= static_cast<int64_t>(batch.size());
    stats.batches += 1;
    stats.batch_sizes[n] += 1;
    stats.compute_time += end - start;
    int64_t offset = 0;
    for (auto& p : batch) {
      if (!output.ok()) {
        ++stats.failed;
        p->answer.set_value(output.status());
        continue;
      }
      BatchResult result;
      const auto first = output->begin() + offset * output_size;
      result.output.assign(first, first + p->work.n * output_size);
      offset += p->work.n;
      result.queue_time = start - p->queued_at;
      result.compute_time = end - start;
      result.batch_size = n;
      ++stats.succeeded;
      stats.samples += p->work.n;
      stats.queue_time += result.queue_time;
      p->answer.set_value(std::move(result));
    }
  }
};

Batcher::Batcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Batcher::~Batcher() { Shutdown(); }

Result<std::unique_ptr<Batcher>> Batcher::Start(BatcherOptions options, int64_t sample_size,
                                                int64_t output_size, ForwardFn forward,
                                                Clock* clock) {
  REEL_RETURN_IF_ERROR(options.Validate());
  if (sample_size < 1 || output_size < 1) {
    return InvalidArgumentError("a sample and an output need at least one value each");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->sample_size = sample_size;
  impl->output_size = output_size;
  impl->forward = std::move(forward);
  impl->clock = clock;
  Impl* raw = impl.get();
  raw->joined.resize(static_cast<size_t>(raw->options.instances));
  for (int i = 0; i < raw->options.instances; ++i) {
    raw->threads.emplace_back([raw, i] { raw->Loop(i); });
  }
  return std::unique_ptr<Batcher>(new Batcher(std::move(impl)));
}

namespace {

std::future<Result<BatchResult>> Ready(Result<BatchResult> result) {
  std::promise<Result<BatchResult>> promise;
  promise.set_value(std::move(result));
  return promise.get_future();
}

Status CheckWork(const BatchWork& work, int max_batch, int64_t sample_size) {
  if (work.n < 1 || work.n > max_batch) {
    return InvalidArgumentError("a request's batch size must be in [1, " +
                                std::to_string(max_batch) + "], not " + std::to_string(work.n));
  }
  if (work.input.empty() && work.input_bytes.size() % sizeof(float) != 0) {
    return InvalidArgumentError("a request's input of " + std::to_string(work.input_bytes.size()) +
                                " bytes is not a whole number of floats");
  }
  if (work.size() != static_cast<size_t>(work.n * sample_size)) {
    return InvalidArgumentError("a request of " + std::to_string(work.n) + " samples needs " +
                                std::to_string(work.n * sample_size) + " values, not " +
                                std::to_string(work.size()));
  }
  return Status::Ok();
}

}  // namespace

Result<BatchResult> Batcher::Run(BatchWork work) { return Submit(std::move(work)).get(); }

std::future<Result<BatchResult>> Batcher::Submit(BatchWork work) {
  Impl& s = *impl_;
  if (Status bad = CheckWork(work, s.options.max_batch, s.sample_size); !bad.ok()) {
    return Ready(std::move(bad));
  }
  std::future<Result<BatchResult>> answer;
  {
    std::lock_guard lock(s.mu);
    if (s.stopping) return Ready(UnavailableError("the model is shutting down"));
    if (static_cast<int>(s.queue.size()) >= s.options.max_queue) {
      ++s.stats.rejected;
      return Ready(ResourceExhaustedError("the model's queue is full (" +
                                          std::to_string(s.options.max_queue) + " requests)"));
    }
    auto pending = std::make_unique<Pending>();
    pending->work = std::move(work);
    pending->queued_at = s.clock->Now();
    answer = pending->answer.get_future();
    s.queue.push_back(std::move(pending));
  }
  s.wake.notify_one();
  return answer;
}

void Batcher::Poke() {
  std::lock_guard lock(impl_->mu);
  impl_->wake.notify_all();
}

BatcherStats Batcher::stats() const {
  std::lock_guard lock(impl_->mu);
  BatcherStats stats = impl_->stats;
  stats.queued = static_cast<int64_t>(impl_->queue.size());
  return stats;
}

const BatcherOptions& Batcher::options() const { return impl_->options; }

void Batcher::Shutdown() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  for (std::thread& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

}  // namespace reel::serve
