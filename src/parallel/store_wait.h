// Waiting for keys in a c10d store without leaving a request behind.
//
// LibTorch 1.13's TCPStore::wait(keys, timeout) gives up on the client side only: the server
// keeps the wait registered and answers it when the key appears, and that late answer is read
// as the reply to the connection's next request (check() then says a missing key exists, get()
// throws "Stop_waiting response is expected"). c10d's later releases cancel the wait; Reel polls
// check() instead, which leaves nothing pending, so one store connection stays usable after any
// number of waits that time out.
//
// Errors: WaitForKeys returns false when `timeout` passes first; it throws what the store throws
// (the store's host is gone), for the caller's adapter to turn into a Status.
// Thread-safety: as the store's (TCPStore serialises its requests).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace reel::parallel {

// True once every key in `keys` exists; polls every few milliseconds at first, then every 50 ms.
bool WaitForKeys(c10d::Store& store, const std::vector<std::string>& keys,
                 std::chrono::milliseconds timeout);

}  // namespace reel::parallel
