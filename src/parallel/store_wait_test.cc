#include "parallel/store_wait.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "base/sync_point.h"

namespace reel::parallel {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

c10d::TCPStoreOptions Client(uint16_t port) {
  c10d::TCPStoreOptions o;
  o.port = port;
  o.isServer = false;
  o.waitWorkers = false;
  o.timeout = 5000ms;
  return o;
}

c10d::TCPStoreOptions Server() {
  c10d::TCPStoreOptions o;
  o.port = 0;  // any free port
  o.isServer = true;
  o.waitWorkers = false;
  return o;
}

// The regression behind a failed learning run: with TCPStore::wait, a wait that timed out was
// answered later, and that answer was taken as the reply to the next request.
TEST(StoreWaitTest, AWaitThatTimedOutLeavesTheConnectionUsable) {
  c10d::TCPStore server("127.0.0.1", Server());
  c10d::TCPStore waiter("127.0.0.1", Client(server.getPort()));
  c10d::TCPStore setter("127.0.0.1", Client(server.getPort()));
  setter.set("x", Bytes("hello"));

  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(WaitForKeys(waiter, {"k"}, 100ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);

  setter.set("k", Bytes("1"));
  // The store's server handles one connection's requests in order and answers waiters as it
  // stores a key: once this get returns, a late answer, were one pending, is on its way.
  (void)setter.get("k");
  EXPECT_FALSE(waiter.check({"missing"}));
  auto x = waiter.get("x");
  EXPECT_EQ(std::string(x.begin(), x.end()), "hello");
  EXPECT_TRUE(WaitForKeys(waiter, {"k", "x"}, 100ms));
  EXPECT_FALSE(WaitForKeys(waiter, {"k", "missing"}, 10ms));
}

TEST(StoreWaitTest, ReturnsAsSoonAsTheKeyAppears) {
  c10d::TCPStore server("127.0.0.1", Server());
  c10d::TCPStore waiter("127.0.0.1", Client(server.getPort()));
  // The key is set only once the waiter has looked for it and not found it.
  std::promise<void> looked;
  SyncPoint::Get().SetCallback("WaitForKeys:Missing",
                               [&, once = std::make_shared<std::once_flag>()] {
                                 std::call_once(*once, [&] { looked.set_value(); });
                               });
  SyncPoint::Get().EnableProcessing();
  std::thread later([&] {
    c10d::TCPStore setter("127.0.0.1", Client(server.getPort()));
    looked.get_future().wait();
    setter.set("k", Bytes("1"));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitForKeys(waiter, {"k"}, 10000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5000ms);
  later.join();
  EXPECT_GE(SyncPoint::Get().Count("WaitForKeys:Missing"), 1);
  SyncPoint::Get().Reset();
}

}  // namespace
}  // namespace reel::parallel
