#include "base/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/sync_point.h"

namespace reel {
namespace {

TEST(ThreadPoolTest, SizeDefaultsToHardware) {
  ThreadPool pool;
  EXPECT_GE(pool.size(), 1u);
  ThreadPool three(3);
  EXPECT_EQ(three.size(), 3u);
}

TEST(ThreadPoolTest, ResultsComeBack) {
  ThreadPool pool(4);
  std::vector<std::future<int>> futures;
  for (int i = 0; i < 100; ++i) futures.push_back(pool.Submit([i] { return i * i; }));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(futures[i].get(), i * i);
}

TEST(ThreadPoolTest, VoidAndMoveOnlyResults) {
  ThreadPool pool(2);
  std::atomic<int> counter{0};
  pool.Submit([&] { counter++; }).get();
  EXPECT_EQ(counter.load(), 1);
  auto ptr = pool.Submit([] { return std::make_unique<std::string>("moved"); }).get();
  EXPECT_EQ(*ptr, "moved");
}

TEST(ThreadPoolTest, ExceptionsPropagateThroughFuture) {
  ThreadPool pool(2);
  auto future = pool.Submit([]() -> int { throw std::runtime_error("boom"); });
  try {
    future.get();
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  // The worker survived the throw.
  EXPECT_EQ(pool.Submit([] { return 7; }).get(), 7);
}

TEST(ThreadPoolTest, TasksSubmittedFromTasksRun) {
  ThreadPool pool(1);  // one worker: the inner task can only run after the outer one returns
  auto outer = pool.Submit([&pool] { return pool.Submit([] { return 11; }); });
  std::future<int> inner = outer.get();
  EXPECT_EQ(inner.get(), 11);
}

TEST(ThreadPoolTest, RunsTasksInParallel) {
  ThreadPool pool(4);
  std::atomic<int> running{0};
  std::atomic<int> peak{0};
  std::vector<std::future<void>> futures;
  for (int i = 0; i < 4; ++i) {
    futures.push_back(pool.Submit([&] {
      const int now = ++running;
      int expected = peak.load();
      while (now > expected && !peak.compare_exchange_weak(expected, now)) {
      }
      // Wait (bounded) for the others so that all four overlap.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (peak.load() < 4 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      --running;
    }));
  }
  for (auto& f : futures) f.get();
  EXPECT_EQ(peak.load(), 4);
}

// A gate that opens once the destructor whose sync point is `stopping` has begun, noting what
// was done by then: work waiting on it is still queued or running when the pool stops (no
// sleeps deciding that).
class GateAtStop {
 public:
  explicit GateAtStop(const std::string& stopping = "ThreadPool::~ThreadPool:Stopping") {
    SyncPoint::Get().SetCallback(stopping, [this] {
      done_at_stop_ = done_.load();
      open_.set_value();
    });
    SyncPoint::Get().EnableProcessing();
  }
  ~GateAtStop() { SyncPoint::Get().Reset(); }
  void Wait() { gate_.wait(); }
  std::atomic<int>& done() { return done_; }
  int done_at_stop() const { return done_at_stop_; }

 private:
  std::promise<void> open_;
  std::shared_future<void> gate_ = open_.get_future().share();
  std::atomic<int> done_{0};
  int done_at_stop_ = -1;
};

TEST(ThreadPoolTest, DestructorDrainsQueue) {
  GateAtStop gate;
  {
    ThreadPool pool(2);
    for (int i = 0; i < 200; ++i) {
      (void)pool.Submit([&gate] {
        gate.Wait();
        ++gate.done();
      });
    }
  }  // futures were dropped; the destructor still runs every task
  EXPECT_EQ(gate.done_at_stop(), 0);
  EXPECT_EQ(gate.done().load(), 200);
}

TEST(ThreadPoolTest, DestructorRunsTasksSubmittedWhileDraining) {
  GateAtStop gate;
  {
    ThreadPool pool(2);
    for (int i = 0; i < 10; ++i) {
      (void)pool.Submit([&pool, &gate] {
        gate.Wait();
        (void)pool.Submit([&gate] { ++gate.done(); });
        ++gate.done();
      });
    }
  }
  EXPECT_EQ(gate.done_at_stop(), 0);
  EXPECT_EQ(gate.done().load(), 20);
}

TEST(ThreadPoolTest, SubmitFromManyThreads) {
  ThreadPool pool(3);
  std::vector<std::thread> submitters;
  std::atomic<long> sum{0};
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&pool, &sum, t] {
      std::vector<std::future<void>> futures;
      for (int i = 0; i < 250; ++i)
        futures.push_back(pool.Submit([&sum, t, i] { sum += t * 1000 + i; }));
      for (auto& f : futures) f.get();
    });
  }
  for (auto& s : submitters) s.join();
  long expected = 0;
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 250; ++i) expected += t * 1000 + i;
  EXPECT_EQ(sum.load(), expected);
}

TEST(ThreadPoolTest, SingleWorkerRunsInFifoOrder) {
  ThreadPool pool(1);
  std::vector<int> order;
  std::vector<std::future<void>> futures;
  for (int i = 0; i < 20; ++i) futures.push_back(pool.Submit([&order, i] { order.push_back(i); }));
  for (auto& f : futures) f.get();
  std::vector<int> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

TEST(SpareThreadsTest, RunsOfferedWorkOnAnotherThread) {
  SpareThreads spare(1);
  EXPECT_EQ(spare.size(), 1u);
  std::thread::id ran_on;
  auto done = spare.Offer([&] { ran_on = std::this_thread::get_id(); });
  ASSERT_TRUE(done.has_value());
  done->get();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_NE(ran_on, std::thread::id());
}

TEST(SpareThreadsTest, DeclinesWhileEveryThreadIsBusyAndTakesWorkOnceItIsDone) {
  SpareThreads spare(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto first = spare.Offer([released] { released.wait(); });
  auto second = spare.Offer([released] { released.wait(); });
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  int ran = 0;
  EXPECT_FALSE(spare.Offer([&] { ++ran; }).has_value());  // both busy: the caller does it
  release.set_value();
  first->get();
  second->get();
  // Ready futures mean idle threads: these are taken, every time.
  for (int i = 0; i < 20; ++i) {
    auto again = spare.Offer([&] { ++ran; });
    ASSERT_TRUE(again.has_value()) << i;
    again->get();
  }
  EXPECT_EQ(ran, 20);
}

TEST(SpareThreadsTest, WorkRunsOnAnotherCoreThanTheCallers) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "the process may use one core";
  SpareThreads spare(1);  // its thread may use every core this one may
  int mine = 0;
  while (!CPU_ISSET(mine, &allowed)) ++mine;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(mine, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // this thread stays on `mine`
  // The spare thread's first work holds it to that core too, where a wake-up might leave it.
  auto held = spare.Offer([&] { sched_setaffinity(0, sizeof(one), &one); });
  ASSERT_TRUE(held.has_value());
  held->get();
  for (int i = 0; i < 20; ++i) {
    int ran_on = -1;
    auto done = spare.Offer([&] { ran_on = sched_getcpu(); });
    ASSERT_TRUE(done.has_value());
    done->get();
    EXPECT_NE(ran_on, mine) << i;
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
}

TEST(SpareThreadsTest, NoThreadsDeclinesEverything) {
  SpareThreads none(0);
  EXPECT_FALSE(none.Offer([] {}).has_value());
}

TEST(SpareThreadsTest, WhatTheWorkThrowsReachesTheCallerAndTheThreadLivesOn) {
  SpareThreads spare(1);
  auto failed = spare.Offer([] { throw std::runtime_error("boom"); });
  ASSERT_TRUE(failed.has_value());
  EXPECT_THROW(failed->get(), std::runtime_error);
  bool ran = false;
  auto next = spare.Offer([&] { ran = true; });
  ASSERT_TRUE(next.has_value());
  next->get();
  EXPECT_TRUE(ran);
}

TEST(SpareThreadsTest, DestructorWaitsForRunningWork) {
  // The work cannot finish before the destructor has begun: it waits for the gate.
  GateAtStop gate("SpareThreads::~SpareThreads:Stopping");
  {
    SpareThreads spare(1);
    auto done = spare.Offer([&gate] {
      gate.Wait();
      ++gate.done();
    });
    ASSERT_TRUE(done.has_value());
  }
  EXPECT_EQ(gate.done_at_stop(), 0);
  EXPECT_EQ(gate.done().load(), 1);
}

TEST(ParallelForTest, RunsEveryIndexOnceAcrossThreads) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> seen(1000);
  ASSERT_TRUE(ParallelFor(pool, 4, seen.size(), [&](size_t i) {
                ++seen[i];
                return Status::Ok();
              }).ok());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 1) << i;
  EXPECT_TRUE(ParallelFor(pool, 4, 0, [](size_t) { return InternalError("never"); }).ok());
}

TEST(ParallelForTest, StopsAtTheFirstErrorAndReturnsIt) {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  const Status s = ParallelFor(pool, 1, 100, [&](size_t i) {
    ++calls;
    return i == 10 ? NotFoundError("piece 10") : Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "piece 10");
  EXPECT_EQ(calls.load(), 11) << "one thread: indices in order, none after the failure";
}

// With threads of its own: every index once, on several threads when asked, on the caller's
// alone (in order, stopping at the first error) when one is enough.
TEST(ParallelForTest, StartsItsOwnThreadsOnlyWhenThereIsWorkForThem) {
  std::vector<std::atomic<int>> seen(500);
  std::mutex mu;
  std::set<std::thread::id> threads;
  ASSERT_TRUE(ParallelFor(3, seen.size(), [&](size_t i) {
                ++seen[i];
                std::lock_guard<std::mutex> lock(mu);
                threads.insert(std::this_thread::get_id());
                return Status::Ok();
              }).ok());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 1) << i;
  EXPECT_GE(threads.size(), 1u);
  EXPECT_LE(threads.size(), 3u);
  std::vector<size_t> order;
  const Status s = ParallelFor(4, 1, [&](size_t i) {
    order.push_back(i);
    return i == 0 ? NotFoundError("piece 0") : Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(order, std::vector<size_t>{0});
  std::thread::id ran_on;
  ASSERT_TRUE(ParallelFor(1, 1, [&](size_t) {
                ran_on = std::this_thread::get_id();
                return Status::Ok();
              }).ok());
  EXPECT_EQ(ran_on, std::this_thread::get_id()) << "one piece: no thread started";
  EXPECT_TRUE(ParallelFor(2, 0, [](size_t) { return InternalError("never"); }).ok());
  EXPECT_GE(HardwareThreads(), 1u);
}

}  // namespace
}  // namespace reel
