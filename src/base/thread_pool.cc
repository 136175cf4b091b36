#include "base/thread_pool.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <exception>
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

namespace {

#if defined(__linux__)
// The cores the calling thread may use, which the threads it starts inherit; empty if unknown.
cpu_set_t CoresAllowed() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) CPU_ZERO(&allowed);
  return allowed;
}

// Lets `thread` run on any of `allowed` but the caller's core, when there is another.
void KeepOffThisCore(std::thread& thread, cpu_set_t allowed) {
  const int here = sched_getcpu();
  if (here < 0) return;
  CPU_CLR(here, &allowed);
  if (CPU_COUNT(&allowed) > 0) {
    pthread_setaffinity_np(thread.native_handle(), sizeof(allowed), &allowed);
  }
}
#endif

}  // namespace

struct SpareThreads::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;  // set while there is work for the thread
  std::promise<void> done;
  bool stopping = false;
  std::thread thread;
#if defined(__linux__)
  cpu_set_t cores = CoresAllowed();  // the cores it started with
#endif
};

SpareThreads::SpareThreads(size_t threads) {
  for (size_t i = 0; i < threads; ++i) {
    workers_.push_back(std::make_unique<Worker>());
    idle_.push_back(workers_.back().get());
  }
  for (auto& worker : workers_) worker->thread = std::thread([this, w = worker.get()] { Loop(w); });
}

SpareThreads::~SpareThreads() {
  for (auto& worker : workers_) {
    {
      std::lock_guard<std::mutex> lock(worker->mu);
      worker->stopping = true;
    }
    worker->cv.notify_one();
  }
  REEL_SYNC_POINT("SpareThreads::~SpareThreads:Stopping");
  for (auto& worker : workers_) worker->thread.join();
}

std::optional<std::future<void>> SpareThreads::Offer(std::function<void()> fn) {
  Worker* worker = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.empty()) return std::nullopt;
    worker = idle_.back();
    idle_.pop_back();
  }
#if defined(__linux__)
  KeepOffThisCore(worker->thread, worker->cores);
#endif
  std::future<void> done;
  {
    std::lock_guard<std::mutex> lock(worker->mu);
    worker->job = std::move(fn);
    worker->done = std::promise<void>();
    done = worker->done.get_future();
  }
  worker->cv.notify_one();
  return done;
}

void SpareThreads::Loop(Worker* worker) {
  while (true) {
    std::function<void()> job;
    std::promise<void> done;
    {
      std::unique_lock<std::mutex> lock(worker->mu);
      worker->cv.wait(lock, [worker] { return worker->stopping || worker->job != nullptr; });
      if (worker->job == nullptr) return;  // stopping, and nothing was handed over
      job = std::exchange(worker->job, nullptr);
      done = std::move(worker->done);
    }
    std::exception_ptr thrown;
    try {
      job();
    } catch (...) {  // handed to the caller through its future
      thrown = std::current_exception();
    }
    {
      // Idle again before the caller hears that the work is done, so that an Offer made once
      // the future is ready finds this thread.
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back(worker);
    }
    thrown ? done.set_exception(thrown) : done.set_value();
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
