#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "base/sync_point.h"

namespace reel {

size_t HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = HardwareThreads();
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  REEL_SYNC_POINT("ThreadPool::~ThreadPool:Stopping");
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::Enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Accepted even while stopping: a task still running during the destructor may submit
    // follow-up work, and the workers only exit once the queue is empty.
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // Jobs are packaged_tasks (see Submit), which store exceptions in their future, so nothing
    // escapes into this thread.
    job();
  }
}

Status ParallelFor(ThreadPool& pool, size_t parallelism, size_t n,
                   const std::function<Status(size_t)>& fn) {
  if (n == 0) return Status::Ok();
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;
  auto worker = [&] {
    while (!failed.load()) {
      const size_t i = next++;
      if (i >= n) return;
      Status status = fn(i);
      if (!status.ok()) {
        std::lock_guard lock(mu);
        if (first_error.ok()) first_error = std::move(status);
        failed = true;
      }
    }
  };
  const size_t helpers = std::min(n, std::max<size_t>(parallelism, 1)) - 1;
  std::vector<std::future<void>> futures;
  for (size_t i = 0; i < helpers; ++i) futures.push_back(pool.Submit(worker));
  worker();
  for (auto& future : futures) future.get();
  return first_error;
}

Status ParallelFor(size_t parallelism, size_t n, const std::function<Status(size_t)>& fn) {
  const size_t helpers = std::min(n, std::max<size_t>(parallelism, 1)) - (n > 0 ? 1 : 0);
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) REEL_RETURN_IF_ERROR(fn(i));
    return Status::Ok();
  }
  ThreadPool pool(helpers);
  return ParallelFor(pool, parallelism, n, fn);
}

}  // namespace reel
