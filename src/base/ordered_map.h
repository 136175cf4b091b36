// An ordered parallel map: fn(i) for i in [begin, end) runs on a thread pool, at most `window`
// calls ahead of the consumer, and Next hands the results out in index order. Ingest maps videos
// to their clips with it and the loader plan entries to samples: work in parallel, output in a
// deterministic order, memory bounded by the window.
//
//   OrderedMap<Clip> clips(&pool, /*window=*/8, [&](size_t i) { return MakeClip(i); });
//   clips.Reset(0, n);
//   while (clips.HasNext()) Use(clips.Next());
//
// Thread-safety: one thread (the consumer) calls every member; fn runs on the pool's threads and
// must not throw. The destructor waits for the calls in flight.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <utility>

#include "base/check.h"
#include "base/clock.h"
#include "base/thread_pool.h"

namespace reel {

template <typename T>
class OrderedMap {
 public:
  // `pool` is not owned and must outlive the map. `before_submit(i)`, when set, runs on the
  // consumer's thread just before fn(i) is queued (the loader starts prefetches from it).
  OrderedMap(ThreadPool* pool, size_t window, std::function<T(size_t)> fn,
             std::function<void(size_t)> before_submit = nullptr)
      : pool_(pool), window_(window), fn_(std::move(fn)), before_submit_(std::move(before_submit)) {
    REEL_CHECK(window_ > 0) << "an OrderedMap needs a window of at least 1";
  }
  ~OrderedMap() { Stop(); }
  OrderedMap(const OrderedMap&) = delete;
  OrderedMap& operator=(const OrderedMap&) = delete;

  // Waits for what is in flight, then maps [begin, end) from `begin`.
  void Reset(size_t begin, size_t end) {
    Stop();
    next_submit_ = next_take_ = begin;
    end_ = end;
    Refill();
  }

  bool HasNext() const { return next_take_ < end_; }
  size_t next_index() const { return next_take_; }

  // fn(next_index())'s result, waiting for it if need be; the seconds spent waiting are added to
  // *waited_s when given (the loader reports them as input wait).
  T Next(double* waited_s = nullptr) {
    REEL_CHECK(HasNext()) << "OrderedMap::Next past the end";
    Refill();
    std::future<T>& front = inflight_.front();
    Wait(front, waited_s);
    T result = front.get();
    inflight_.pop_front();
    ++next_take_;
    Refill();
    return result;
  }

  // Waits (adding the seconds to *waited_s when given) until the next `count` results, or as many
  // as remain, are likely ready: for the last of them, which the pool started last. A consumer
  // that takes results in groups (a batch) then sleeps and wakes once per group, not per result.
  void WaitAhead(size_t count, double* waited_s = nullptr) {
    Refill();
    const size_t k = std::min({count, inflight_.size(), end_ - next_take_});
    if (k > 0) Wait(inflight_[k - 1], waited_s);
  }

  // Submits no more and waits for every call in flight; HasNext() is false afterwards.
  void Stop() {
    for (auto& f : inflight_) f.wait();
    inflight_.clear();
    next_submit_ = next_take_ = end_;
  }

 private:
  // Waits for `f`, adding the seconds to *waited_s when given and it was not ready yet.
  static void Wait(std::future<T>& f, double* waited_s) {
    if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return;
    const auto started = std::chrono::steady_clock::now();
    f.wait();
    if (waited_s != nullptr) *waited_s += SecondsSince(started);
  }

  void Refill() {
    while (inflight_.size() < window_ && next_submit_ < end_) {
      const size_t i = next_submit_++;
      if (before_submit_) before_submit_(i);
      inflight_.push_back(pool_->Submit([this, i] { return fn_(i); }));
    }
  }

  ThreadPool* pool_;
  size_t window_;
  std::function<T(size_t)> fn_;
  std::function<void(size_t)> before_submit_;
  std::deque<std::future<T>> inflight_;
  size_t next_submit_ = 0;
  size_t next_take_ = 0;
  size_t end_ = 0;
};

}  // namespace reel
