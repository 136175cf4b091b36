#include "dist/comm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dist/net.h"
#include "dist/testing/thread_world.h"

namespace reel::dist {
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
    EXPECT_TRUE(reduced.ok()) << reduced.ToString();
    EXPECT_TRUE(torch::equal(t, torch::full({5}, 6.0))) << t;

    at::Tensor half = torch::full({3}, rank + 0.5, torch::kHalf);
    EXPECT_TRUE(comm->AllReduce(half, "half sum").ok());
    EXPECT_FLOAT_EQ(half[0].item<float>(), 4.5f);

    std::vector<at::Tensor> tensors = {torch::full({2, 3}, static_cast<float>(rank)),
                                       torch::full({4}, static_cast<int64_t>(rank * 10)),
                                       torch::full({1}, static_cast<float>(rank + 7))};
    Status sent = comm->Broadcast(tensors, 1, "test broadcast");
    EXPECT_TRUE(sent.ok()) << sent.ToString();
    EXPECT_TRUE(torch::equal(tensors[0], torch::full({2, 3}, 1.0f)));
    EXPECT_TRUE(torch::equal(tensors[1], torch::full({4}, int64_t{10})));
    EXPECT_TRUE(torch::equal(tensors[2], torch::full({1}, 8.0f)));
    EXPECT_TRUE(comm->Barrier("end").ok());
  });
  EXPECT_EQ(failures, 0);
}

TEST(CommTest, ARankThatNeverJoinsIsNamed) {
  auto store = testing::StartStore();
  CommOptions o = Fast();
  o.connect_timeout = std::chrono::milliseconds(1500);
  auto comm = Comm::Connect(testing::ThreadWorld(*store, 0, 2), o);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(comm.status().message().find("ranks 1 did not join the rendezvous at 127.0.0.1:"), std::string::npos)
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
  RunRanks(2, o, [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    ASSERT_TRUE(comm->AllReduce(torch::ones({4}), "warm-up").ok());
    if (rank == 0) {
      Status s = comm->AllReduce(torch::ones({4}), "gradient bucket 0 of step 2");
      ASSERT_FALSE(s.ok());
      rank0_error = s.message();
      // Let rank 1 see its partner gone rather than wait on it.
      EXPECT_FALSE(comm->Barrier("after the failure").ok());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // stuck in compute
      (void)comm->AllReduce(torch::ones({4}), "gradient bucket 0 of step 2");
    }
  });
  EXPECT_NE(rank0_error.find("collective #2 (gradient bucket 0 of step 2) failed"), std::string::npos) << rank0_error;
  EXPECT_NE(rank0_error.find("rank 1 is alive but behind: it issued only collective #1 (warm-up)"), std::string::npos)
      << rank0_error;
}

// Rank 0 works alone (an evaluation) for several heartbeat intervals, three times; rank 1 waits
// for it each time, and the store and the group stay usable after all those waits.
TEST(CommTest, FollowLeaderWaitsForABusyRankZero) {
  torch::set_num_threads(1);
  using std::chrono::milliseconds;
  RunRanks(2, Fast(), [&](int rank, Comm* comm) {
    ASSERT_NE(comm, nullptr);
    for (int round = 0; round < 3; ++round) {
      const auto start = std::chrono::steady_clock::now();
      if (rank == 0) std::this_thread::sleep_for(milliseconds(450));  // 4.5 heartbeat intervals
      Status followed = comm->FollowLeader("rank 0 evaluating, round " + std::to_string(round), milliseconds(10000));
      EXPECT_TRUE(followed.ok()) << followed.ToString();
      if (rank == 1) EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(400));
      at::Tensor t = torch::full({3}, rank + 1.0);
      Status reduced = comm->AllReduce(t, "after round " + std::to_string(round));
      EXPECT_TRUE(reduced.ok()) << reduced.ToString();
      EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0))) << t;
    }
  });
}

// Without a launcher rank 0 hosts the store. It sets its last "done" key and leaves at once;
// rank 1 looks for that key only later, so rank 0's Comm must keep the store up until then.
TEST(CommTest, RankZeroHostingTheStoreStaysUntilTheOthersLeave) {
  torch::set_num_threads(1);
  using std::chrono::milliseconds;
  int port = 0;
  {
    auto probe = ProbeListener::Listen("127.0.0.1");  // a free port, released again
    ASSERT_TRUE(probe.ok());
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
  double rank0_leave_s = 0;
  std::thread rank0([&] {
    auto comm = Comm::Connect(world(0), Fast());
    ASSERT_TRUE(comm.ok()) << comm.status().ToString();
    EXPECT_TRUE((*comm)->FollowLeader("the final evaluation", milliseconds(10000)).ok());
    const auto start = std::chrono::steady_clock::now();
    comm->reset();
    rank0_leave_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  std::thread rank1([&] {
    auto comm = Comm::Connect(world(1), Fast());
    ASSERT_TRUE(comm.ok()) << comm.status().ToString();
    std::this_thread::sleep_for(milliseconds(500));  // still writing its own results
    followed = (*comm)->FollowLeader("the final evaluation", milliseconds(10000));
  });
  rank0.join();
  rank1.join();
  EXPECT_TRUE(followed.ok()) << followed.ToString();
  EXPECT_GE(rank0_leave_s, 0.3);
}

}  // namespace
}  // namespace reel::dist
