#include "base/ordered_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace reel {
namespace {

TEST(OrderedMapTest, ResultsComeInIndexOrderWhateverOrderTheyFinishIn) {
  ThreadPool pool(4);
  // Even indices wait until the odd one after them has run: completion order is scrambled.
  std::vector<std::promise<void>> odd_done(20);
  OrderedMap<int> map(&pool, 8, [&](size_t i) {
    if (i % 2 == 0 && i + 1 < 20) odd_done[i + 1].get_future().wait();
    if (i % 2 == 1) odd_done[i].set_value();
    return static_cast<int>(i * i);
  });
  map.Reset(0, 20);
  std::vector<int> got;
  while (map.HasNext()) got.push_back(map.Next());
  ASSERT_EQ(got.size(), 20u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<int>(i * i));
}

TEST(OrderedMapTest, NeverRunsMoreThanTheWindowAheadOfTheConsumer) {
  ThreadPool pool(3);
  std::atomic<size_t> submitted{0};
  size_t taken = 0;
  size_t most_ahead = 0;
  OrderedMap<size_t> map(
      &pool, 4, [](size_t i) { return i; },
      [&](size_t i) {
        submitted = i + 1;
        most_ahead = std::max(most_ahead, (i + 1) - (5 + taken));
      });
  map.Reset(5, 30);
  EXPECT_EQ(map.next_index(), 5u);
  while (map.HasNext()) {
    EXPECT_EQ(map.Next(), 5 + taken);
    ++taken;
  }
  EXPECT_EQ(taken, 25u);
  // Next refills right after taking, before this loop counts the taken one: window + 1.
  EXPECT_LE(most_ahead, 5u);
  EXPECT_EQ(submitted.load(), 30u);
}

TEST(OrderedMapTest, WaitAheadReturnsOnceTheLastOfTheGroupIsDone) {
  ThreadPool pool(2);
  std::vector<std::promise<void>> release(6);
  std::vector<std::atomic<bool>> finished(6);
  OrderedMap<int> map(&pool, 6, [&](size_t i) {
    release[i].get_future().wait();
    finished[i] = true;
    return static_cast<int>(i);
  });
  map.Reset(0, 6);
  release[0].set_value();
  release[1].set_value();
  std::thread late([&] { release[2].set_value(); });
  double waited = 0;
  map.WaitAhead(3, &waited);
  late.join();
  EXPECT_TRUE(finished[2]);
  EXPECT_GE(waited, 0.0);
  for (size_t i = 3; i < 6; ++i) release[i].set_value();
  for (int i = 0; i < 6; ++i) {
    map.WaitAhead(100);  // more than remain: waits for the last one there is
    EXPECT_EQ(map.Next(), i);
  }
  map.WaitAhead(4);  // at the end: nothing to wait for
}

TEST(OrderedMapTest, StopWaitsForWhatIsInFlightAndResetStartsAgain) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  OrderedMap<int> map(&pool, 6, [&](size_t i) {
    ++ran;
    return static_cast<int>(i);
  });
  map.Reset(0, 100);
  EXPECT_EQ(map.Next(), 0);
  map.Stop();
  EXPECT_FALSE(map.HasNext());
  EXPECT_LE(ran.load(), 7) << "at most the window past what was taken ran";
  map.Reset(40, 42);
  EXPECT_EQ(map.Next(), 40);
  EXPECT_EQ(map.Next(), 41);
  EXPECT_FALSE(map.HasNext());
}

}  // namespace
}  // namespace reel
