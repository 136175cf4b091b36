// A fixed-size pool of worker threads with a FIFO queue.
// Thread-safety: Submit may be called from any thread, including from inside a task.
// The destructor finishes every queued task, then joins the workers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/status.h"

namespace reel {

class ThreadPool {
 public:
  // `threads` == 0 means std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(size_t threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }

  // Queues `fn` and returns a future for its result; an exception thrown by fn is stored in the
  // future.
  template <typename Fn>
  auto Submit(Fn&& fn) -> std::future<std::invoke_result_t<std::decay_t<Fn>>> {
    using R = std::invoke_result_t<std::decay_t<Fn>>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<Fn>(fn));
    std::future<R> future = task->get_future();
    Enqueue([task] { (*task)(); });
    return future;
  }

 private:
  void Enqueue(std::function<void()> job);
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Threads that take work only while idle. Offer hands fn to an idle thread, or declines at once
// when every thread is busy, and the caller then does the work itself: one request's work split
// this way uses the cores a server has free, and never waits behind other requests' work, as
// it would in a ThreadPool's queue on a loaded machine.
class SpareThreads {
 public:
  explicit SpareThreads(size_t threads);
  ~SpareThreads();  // waits for the work running, then joins the threads
  SpareThreads(const SpareThreads&) = delete;
  SpareThreads& operator=(const SpareThreads&) = delete;

  size_t size() const { return workers_.size(); }

  // fn started on an idle thread, and a future that is ready when it has returned (holding what
  // it threw); no value when no thread was idle. The thread runs it on another core than the
  // caller's (where the process may use another): the caller goes on working, and Linux may wake
  // a thread on the waker's own core while the others idle, where it waits for the caller to
  // sleep (on the development VM, after 5 ms idle, two wake-ups in three, some 3 ms late).
  std::optional<std::future<void>> Offer(std::function<void()> fn);

 private:
  struct Worker;
  void Loop(Worker* worker);

  std::mutex mu_;
  std::vector<Worker*> idle_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// Runs fn(0..n-1) on the calling thread plus up to parallelism-1 of `pool`'s threads, stopping at
// the first error, which it returns. The caller works too, so a busy pool can slow it but never
// deadlock it (fn may itself run on a pool thread).
Status ParallelFor(ThreadPool& pool, size_t parallelism, size_t n,
                   const std::function<Status(size_t)>& fn);

// The same on threads of its own: the caller and up to parallelism - 1 more, started for this
// call (none when the caller alone is enough).
Status ParallelFor(size_t parallelism, size_t n, const std::function<Status(size_t)>& fn);

// How many threads this machine runs at once (at least 1): the usual parallelism.
size_t HardwareThreads();

}  // namespace reel
