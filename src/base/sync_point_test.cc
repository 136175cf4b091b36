#include "base/sync_point.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace reel {
namespace {

class SyncPointTest : public ::testing::Test {
 protected:
  void TearDown() override { SyncPoint::Get().Reset(); }
};

TEST_F(SyncPointTest, ASuccessorWaitsForItsPredecessor) {
  SyncPoint& sp = SyncPoint::Get();
  sp.LoadDependencies({{"writer:done", "reader:start"}});
  sp.EnableProcessing();
  std::vector<std::string> order;
  std::mutex mu;
  auto record = [&](const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(what);
  };
  std::thread reader([&] {
    REEL_SYNC_POINT("reader:start");
    record("read");
  });
  std::thread writer([&] {
    record("write");
    REEL_SYNC_POINT("writer:done");
  });
  reader.join();
  writer.join();
  EXPECT_EQ(order, (std::vector<std::string>{"write", "read"}));
  EXPECT_EQ(sp.Count("reader:start"), 1);
  EXPECT_EQ(sp.Count("writer:done"), 1);
}

TEST_F(SyncPointTest, CallbacksRunAtTheirPointOnlyWhileEnabled) {
  SyncPoint& sp = SyncPoint::Get();
  int calls = 0;
  sp.SetCallback("p", [&] { ++calls; });
  REEL_SYNC_POINT("p");  // not enabled yet
  EXPECT_EQ(calls, 0);
  sp.EnableProcessing();
  REEL_SYNC_POINT("p");
  REEL_SYNC_POINT("p");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(sp.Count("p"), 2);
  sp.Reset();
  REEL_SYNC_POINT("p");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(sp.Count("p"), 0);
}

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock;
  const auto start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(std::chrono::milliseconds(120));
  EXPECT_EQ(clock.Now() - start, std::chrono::milliseconds(120));
  clock.SleepFor(std::chrono::seconds(2));
  EXPECT_EQ(clock.Now() - start, std::chrono::milliseconds(2120));
  EXPECT_GE(Clock::System()->Now().time_since_epoch().count(), 0);
}

}  // namespace
}  // namespace reel
