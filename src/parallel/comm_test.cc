#include "parallel/comm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "base/sync_point.h"
#include "parallel/net.h"
#include "parallel/testing/thread_world.h"
#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

using testing::RunRanks;

CommOptions Fast() {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(5000);
  o.connect_timeout = std::chrono::milliseconds(20000);
  o.heartbeat_interval = std::chrono::milliseconds(100);
  return o;
}

TEST(CommTest, AllReduceSumsAndBroadcastCopiesFromRoot) {
  torch::set_num_threads(1);
  std::atomic<int> failures{0};
  RunRanks(3, Fast(), [&](int rank, Comm* comm) {
    if (comm == nullptr) {
      ++failures;
      return;
    }
    EXPECT_EQ(comm->backend(), "gloo");
    at::Tensor t = torch::full({5}, rank + 1.0);
    Status reduced = comm->AllReduce(t, "test sum");
    EXPECT_OK(reduced);
    EXPECT_TRUE(torch::equal(t, torch::full({5}, 6.0))) << t;

    at::Tensor half = torch::full({3}, rank + 0.5, torch::kHalf);
    EXPECT_OK(comm->AllReduce(half, "half sum"));
    EXPECT_FLOAT_EQ(half[0].item<float>(), 4.5f);

    std::vector<at::Tensor> tensors = {torch::full({2, 3}, static_cast<float>(rank)),
                                       torch::full({4}, static_cast<int64_t>(rank * 10)),
                                       torch::full({1}, static_cast<float>(rank + 7))};
    Status sent = comm->Broadcast(tensors, 1, "test broadcast");
    EXPECT_OK(sent);
    EXPECT_TRUE(torch::equal(tensors[0], torch::full({2, 3}, 1.0f)));
    EXPECT_TRUE(torch::equal(tensors[1], torch::full({4}, int64_t{10})));
    EXPECT_TRUE(torch::equal(tensors[2], torch::full({1}, 8.0f)));
    EXPECT_OK(comm->Barrier("end"));
  });
  EXPECT_EQ(failures, 0);
}

TEST(CommTest, ARankThatNeverJoinsIsNamed) {
  auto store = testing::StartStore();
  CommOptions o = Fast();
  o.connect_timeout = std::chrono::milliseconds(1500);
  auto comm = Comm::Connect(testing::ThreadWorld(*store, 0, 2), o);
  ASSERT_FALSE(comm.ok());
  EXPECT_STATUS(comm, StatusCode::kUnavailable);
  EXPECT_NE(comm.status().message().find("ranks 1 did not join the rendezvous at 127.0.0.1:"),
            std::string::npos)
      << comm.status().message();
}

TEST(CommTest, UnreachableStoreIsAClearError) {
  WorldInfo w;
  w.world_size = 2;
  w.rank = 1;
  w.master_addr = "127.0.0.1";
  {
    auto store = testing::StartStore();
    w.master_port = store->getPort();
  }  // closed again: nobody listens there now
  w.agent_store = true;
  CommOptions o = Fast();
  o.connect_timeout = std::chrono::milliseconds(1000);
  auto comm = Comm::Connect(w, o);
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("cannot reach the rendezvous store at 127.0.0.1:" +
                                         std::to_string(w.master_port)),
            std::string::npos)
      << comm.status().message();
}

TEST(CommTest, WatchdogNamesTheRankThatFellBehind) {
  torch::set_num_threads(1);
  CommOptions o = Fast();
  o.timeout = std::chrono::milliseconds(1500);
  std::string rank0_error;
  // Rank 1 is stuck in compute until rank 0 has given up on it (no sleep decides how long).
  std::promise<void> rank0_gave_up;
  std::shared_future<void> gave_up = rank0_gave_up.get_future().share();
  RunRanks(2, o, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    ASSERT_OK(comm->AllReduce(torch::ones({4}), "warm-up"));
    if (rank == 0) {
      Status s = comm->AllReduce(torch::ones({4}), "gradient bucket 0 of step 2");
      rank0_error = s.message();
      // Let rank 1 see its partner gone rather than wait on it.
      Status barrier = comm->Barrier("after the failure");
      rank0_gave_up.set_value();
      ASSERT_FALSE(s.ok());
      EXPECT_FALSE(barrier.ok());
    } else {
      gave_up.wait();  // stuck in compute
      // Its partner is gone: this fails, and the test is about rank 0's report.
      comm->AllReduce(torch::ones({4}), "gradient bucket 0 of step 2").IgnoreError();
    }
  });
  EXPECT_NE(rank0_error.find("collective #2 (gradient bucket 0 of step 2) failed"),
            std::string::npos)
      << rank0_error;
  EXPECT_NE(rank0_error.find("rank 1 is alive but behind: it issued only collective #1 (warm-up)"),
            std::string::npos)
      << rank0_error;
}

// Rank 0 works alone (an evaluation) for several heartbeat intervals, three times; rank 1 waits
// for it each time, and the store and the group stay usable after all those waits.
TEST(CommTest, FollowLeaderWaitsForABusyRankZero) {
  torch::set_num_threads(1);
  using std::chrono::milliseconds;
  // Rank 0 starts its part of each round only once rank 1, waiting, has seen rank 0's heartbeat
  // change four times: rank 0 is busy for several intervals, decided by events, not a sleep.
  constexpr int kBeats = 4;
  std::atomic<int> seen{0};
  std::promise<void> busy_long_enough[3];
  std::atomic<int> round_of_rank1{0};
  SyncPoint::Get().SetCallback("Comm::FollowLeader:RankZeroAlive", [&] {
    if (++seen == kBeats) busy_long_enough[round_of_rank1.load()].set_value();
  });
  SyncPoint::Get().EnableProcessing();
  RunRanks(2, Fast(), [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    for (int round = 0; round < 3; ++round) {
      const auto start = std::chrono::steady_clock::now();
      if (rank == 0) busy_long_enough[round].get_future().wait();  // "evaluating"
      Status followed = comm->FollowLeader("rank 0 evaluating, round " + std::to_string(round),
                                           milliseconds(10000));
      EXPECT_OK(followed);
      if (rank == 1) {
        EXPECT_GE(seen.load(), kBeats);
        // Four distinct heartbeats take at least three heartbeat intervals (100 ms each).
        EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(300));
        seen = 0;
        round_of_rank1 = round + 1;
      }
      at::Tensor t = torch::full({3}, rank + 1.0);
      Status reduced = comm->AllReduce(t, "after round " + std::to_string(round));
      EXPECT_OK(reduced);
      EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0))) << t;
    }
  });
  SyncPoint::Get().Reset();
}

// Without a launcher rank 0 hosts the store. It sets its last "done" key and leaves at once;
// rank 1 looks for that key only later, so rank 0's Comm must keep the store up until then.
TEST(CommTest, RankZeroHostingTheStoreStaysUntilTheOthersLeave) {
  torch::set_num_threads(1);
  using std::chrono::milliseconds;
  int port = 0;
  {
    auto probe = ProbeListener::Listen("127.0.0.1");  // a free port, released again
    ASSERT_OK(probe);
    port = (*probe)->port();
  }
  auto world = [&](int rank) {
    WorldInfo w;
    w.rank = w.local_rank = rank;
    w.world_size = w.local_world_size = 2;
    w.master_addr = "127.0.0.1";
    w.master_port = port;
    w.source = "test";
    return w;
  };
  Status followed = InternalError("rank 1 did not run");
  // Rank 1 looks for the key only once rank 0 is already leaving.
  std::promise<void> rank0_leaving;
  SyncPoint::Get().SetCallback("Comm::LeaveRendezvous:HostWaits",
                               [&] { rank0_leaving.set_value(); });
  SyncPoint::Get().EnableProcessing();
  std::atomic<bool> rank1_followed{false};
  bool rank1_done_before_rank0_left = false;
  std::thread rank0([&] {
    auto comm = Comm::Connect(world(0), Fast());
    ASSERT_OK(comm);
    EXPECT_OK((*comm)->FollowLeader("the final evaluation", milliseconds(10000)));
    comm->reset();
    rank1_done_before_rank0_left = rank1_followed.load();
  });
  std::thread rank1([&] {
    auto comm = Comm::Connect(world(1), Fast());
    ASSERT_OK(comm);
    rank0_leaving.get_future().wait();  // still writing its own results
    followed = (*comm)->FollowLeader("the final evaluation", milliseconds(10000));
    rank1_followed = true;
  });
  rank0.join();
  rank1.join();
  SyncPoint::Get().Reset();
  EXPECT_OK(followed);
  EXPECT_TRUE(rank1_done_before_rank0_left)
      << "rank 0 took the store away before rank 1 had read its key";
}

}  // namespace
}  // namespace reel::parallel
